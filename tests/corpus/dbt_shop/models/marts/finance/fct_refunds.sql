select
    refunds.refund_id,
    refunds.payment_id,
    payments.order_id,
    orders.customer_id,
    orders.order_date,
    refunds.refund_reason,
    refunds.refund_amount,
    refunds.refunded_at,
    datediff('day', orders.ordered_at, refunds.refunded_at) as days_after_order
from {{ ref('stg_stripe__refunds') }} as refunds
inner join {{ ref('stg_stripe__payments') }} as payments
    on refunds.payment_id = payments.payment_id
inner join {{ ref('fct_orders') }} as orders
    on payments.order_id = orders.order_id
