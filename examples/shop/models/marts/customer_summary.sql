-- One row per customer: lifetime orders and net revenue, for the finance mart.
select
    c.customer_id,
    c.email,
    count(f.order_id) as orders,
    sum(f.net_revenue) as lifetime_net_revenue
from {{ ref('stg_customers') }} c
left join {{ ref('fct_orders') }} f on f.customer_id = c.customer_id
group by c.customer_id, c.email
