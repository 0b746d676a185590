{#
    Shop customers, enriched with their B2B account when their e-mail matches a CRM contact.
    The CRM join used to read {{ ref('stg_crm__contacts') }} directly; now it goes through
    the intermediate model.
#}
with customers as (
    select * from {{ ref('int_customers__order_history') }}
),

b2b as (
    select * from {{ ref('int_crm__accounts_contacts') }}
)

select
    customers.*,
    b2b.account_id,
    b2b.account_name,
    b2b.industry,
    b2b.account_id is not null as is_b2b
from customers
left join b2b
    on customers.email = b2b.email
