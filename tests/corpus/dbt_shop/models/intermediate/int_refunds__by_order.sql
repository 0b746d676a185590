select
    payments.order_id,
    count(distinct refunds.refund_id) as refund_count,
    sum(refunds.refund_amount) as refunded_amount,
    max(refunds.refunded_at) as last_refunded_at
from {{ ref('stg_stripe__refunds') }} as refunds
inner join {{ ref('stg_stripe__payments') }} as payments
    on refunds.payment_id = payments.payment_id
group by payments.order_id
