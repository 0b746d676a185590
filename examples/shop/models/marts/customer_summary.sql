-- One row per customer: lifetime orders and net revenue, for the finance mart.
insert into marts.customer_summary (customer_id, email, orders, lifetime_net_revenue)
select
    c.customer_id,
    c.email,
    count(f.order_id) as orders,
    sum(f.net_revenue) as lifetime_net_revenue
from staging.stg_customers c
left join marts.fct_orders f on f.customer_id = c.customer_id
group by c.customer_id, c.email
