{{ config(materialized='table', unique_key='customer_id', tags=['core', 'pii']) }}

with customers as (

    select * from {{ ref('int_customers__unified') }}

),

email as (

    select * from {{ ref('int_email__engagement') }}

)

select
    customers.customer_id,
    customers.email,
    customers.first_name,
    customers.last_name,
    customers.country_code,
    customers.signed_up_at,
    customers.first_ordered_at,
    customers.last_ordered_at,
    customers.order_count,
    customers.lifetime_value,
    customers.favourite_store_id,
    customers.is_b2b,
    customers.account_name,
    coalesce(email.emails_received, 0) as emails_received,
    coalesce(email.emails_opened, 0) as emails_opened,
    coalesce(email.has_unsubscribed, false) as has_unsubscribed,
    case
        when customers.order_count = 0 then 'prospect'
        when customers.order_count = 1 then 'new'
        when customers.last_ordered_at < dateadd(day, -365, current_date) then 'lapsed'
        else 'returning'
    end as customer_segment
from customers
left join email
    on customers.customer_id = email.customer_id
