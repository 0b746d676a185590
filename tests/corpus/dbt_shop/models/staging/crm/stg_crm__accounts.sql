select
    id as account_id,
    name as account_name,
    industry,
    annual_revenue,
    owner_id as account_owner_id,
    billing_country as country_code,
    created_date as created_at
from {{ source('crm', 'accounts') }}
where not is_deleted
