{{ config(materialized='table', tags=['core', 'customer_success']) }}

-- depends_on: {{ ref('int_events__daily') }}

{%- set relations = [ref('fct_orders'), ref('fct_support_tickets')] %}

with customers as (

    select * from {{ ref('dim_customers') }}

),

recent_orders as (

    select customer_id, count(*) as orders_90d, sum(net_paid) as revenue_90d
    from {{ ref('fct_orders') }}
    where ordered_at >= dateadd(day, -90, current_date)
    group by customer_id

),

tickets as (

    select
        customer_id,
        count(*) as tickets_90d,
        sum(case when priority in ('urgent', 'high') then 1 else 0 end) as urgent_tickets_90d
    from {{ ref('fct_support_tickets') }}
    where opened_at >= dateadd(day, -90, current_date)
    group by customer_id

)

select
    customers.customer_id,
    customers.customer_segment,
    customers.lifetime_value,
    coalesce(recent_orders.orders_90d, 0) as orders_90d,
    coalesce(recent_orders.revenue_90d, 0) as revenue_90d,
    coalesce(tickets.tickets_90d, 0) as tickets_90d,
    case
        when coalesce(tickets.urgent_tickets_90d, 0) > 2 then 'at_risk'
        when coalesce(recent_orders.orders_90d, 0) = 0 then 'inactive'
        else 'healthy'
    end as health_status
from customers
left join recent_orders on customers.customer_id = recent_orders.customer_id
left join tickets on customers.customer_id = tickets.customer_id
{{ limit_in_dev(500) }}
