with customers as (

    select * from {{ ref('stg_shop__customers') }}

),

orders as (

    select * from {{ ref('int_orders__with_payments') }}
    where order_status not in ('cancelled')

),

customer_orders as (

    select
        customer_id,
        min(ordered_at) as first_ordered_at,
        max(ordered_at) as last_ordered_at,
        count(*) as order_count,
        sum(net_paid) as lifetime_value
    from orders
    group by customer_id

),

ranked as (

    select
        customer_id,
        store_id,
        row_number() over (partition by customer_id order by count(*) desc) as store_rank
    from orders
    group by customer_id, store_id

)

select
    customers.customer_id,
    customers.email,
    customers.first_name,
    customers.last_name,
    customers.country_code,
    customers.signed_up_at,
    customer_orders.first_ordered_at,
    customer_orders.last_ordered_at,
    coalesce(customer_orders.order_count, 0) as order_count,
    coalesce(customer_orders.lifetime_value, 0) as lifetime_value,
    ranked.store_id as favourite_store_id
from customers
left join customer_orders on customers.customer_id = customer_orders.customer_id
left join ranked on customers.customer_id = ranked.customer_id and ranked.store_rank = 1
