-- Staging: customers with normalised emails.
select
    id as customer_id,
    lower(email) as email,
    first_name,
    last_name,
    created_at
from {{ source('raw', 'shop_customers') }}
