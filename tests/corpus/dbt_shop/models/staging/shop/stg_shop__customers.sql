{{ config(materialized='table') }}

with customers as (

    select * from {{ source("shop", "customers") }}

)

select
    id as customer_id,
    initcap(trim(first_name)) as first_name,
    initcap(trim(last_name)) as last_name,
    lower(email) as email,
    split_part(lower(email), '@', 2) as email_domain,
    country as country_code,
    marketing_opt_in,
    created_at as signed_up_at,
    updated_at
from customers
where email is not null
qualify row_number() over (partition by lower(email) order by updated_at desc) = 1
