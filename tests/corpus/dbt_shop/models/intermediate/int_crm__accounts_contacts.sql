select
    contacts.contact_id,
    contacts.email,
    contacts.job_title,
    accounts.account_id,
    accounts.account_name,
    accounts.industry,
    accounts.annual_revenue
from {{ ref('stg_crm__contacts') }} as contacts
inner join {{ ref('stg_crm__accounts') }} as accounts
    on contacts.account_id = accounts.account_id
