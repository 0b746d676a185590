select
    id as contact_id,
    account_id,
    lower(email) as email,
    first_name,
    last_name,
    title as job_title,
    created_date as created_at
from {{ source('crm', 'contacts') }}
where not is_deleted
  and email is not null
