{{
    config(
        materialized='table',
        alias='monthly_finance'
    )
}}

with revenue as (

    select
        date_trunc('month', date_day) as month_start,
        sum(gross_revenue) as gross_revenue,
        sum(gross_margin) as gross_margin,
        sum(net_revenue) as net_revenue
    from {{ ref('fct_revenue_daily') }}
    group by 1

),

refunds as (

    select
        date_trunc('month', refunded_at) as month_start,
        sum(refund_amount) as refunded_amount,
        count(*) as refund_count
    from {{ ref("fct_refunds") }}
    group by 1

),

payments as (

    select
        date_trunc('month', created_at) as month_start,
        sum(amount) as collected_amount
    from {{ ref('dbt_shop', 'fct_payments') }}
    where payment_status = 'success'
    group by 1

)

select
    revenue.month_start,
    revenue.gross_revenue,
    revenue.gross_margin,
    revenue.net_revenue,
    payments.collected_amount,
    coalesce(refunds.refunded_amount, 0) as refunded_amount,
    coalesce(refunds.refund_count, 0) as refund_count,
    {{ safe_divide('refunds.refunded_amount', 'revenue.gross_revenue') }} as refund_rate,
    revenue.net_revenue - lag(revenue.net_revenue) over (order by revenue.month_start) as net_revenue_change
from revenue
left join refunds on revenue.month_start = refunds.month_start
left join payments on revenue.month_start = payments.month_start
