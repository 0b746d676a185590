-- Orders with what was actually paid: net_revenue is payments minus refunds.
with payments as (
    select order_id, sum(amount) as net_revenue
    from {{ ref('stg_payments') }}
    group by order_id
)
select
    o.order_id,
    o.customer_id,
    o.order_date,
    o.status,
    coalesce(p.net_revenue, 0) as net_revenue
from {{ ref('stg_orders') }} o
left join payments p on p.order_id = o.order_id
