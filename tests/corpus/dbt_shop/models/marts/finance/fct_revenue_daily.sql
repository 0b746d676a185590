{{ config(materialized='table', schema='finance') }}

with orders as (

    select * from {{ ref('fct_orders') }}
    where order_status in ('completed', 'shipped', 'returned')

),

daily as (

    select
        order_date,
        region,
        count(*) as order_count,
        sum(gross_revenue) as gross_revenue,
        sum(gross_margin) as gross_margin,
        sum(net_paid) as net_revenue
    from orders
    group by 1, 2

)

select
    dates.date_day,
    daily.region,
    coalesce(daily.order_count, 0) as order_count,
    coalesce(daily.gross_revenue, 0) as gross_revenue,
    coalesce(daily.gross_margin, 0) as gross_margin,
    coalesce(daily.net_revenue, 0) as net_revenue,
    sum(coalesce(daily.net_revenue, 0)) over (
        partition by daily.region, date_trunc('month', dates.date_day)
        order by dates.date_day
        rows between unbounded preceding and current row
    ) as month_to_date_revenue,
    dates.is_holiday
from {{ ref('dim_dates') }} as dates
left join daily
    on dates.date_day = daily.order_date
where dates.date_day <= current_date
