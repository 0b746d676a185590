with orders as (
    select * from {{ ref('int_orders__enriched') }}
),

payments as (
    select * from {{ ref('int_payments__pivoted') }}
),

refunds as (
    select * from {{ ref('int_refunds__by_order') }}
)

select
    orders.*,
    coalesce(payments.total_paid, 0) as total_paid,
    coalesce(payments.card_amount, 0) as card_amount,
    coalesce(payments.coupon_amount, 0) as coupon_amount,
    coalesce(refunds.refunded_amount, 0) as refunded_amount,
    coalesce(payments.total_paid, 0) - coalesce(refunds.refunded_amount, 0) as net_paid,
    payments.first_paid_at
from orders
left join payments on orders.order_id = payments.order_id
left join refunds on orders.order_id = refunds.order_id
