select
    id as refund_id,
    payment_id,
    reason as refund_reason,
    {{ cents_to_dollars('amount') }} as refund_amount,
    status as refund_status,
    created as refunded_at
from {{ source('stripe', 'refunds') }}
where status <> 'failed'
