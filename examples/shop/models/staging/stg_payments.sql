-- Staging: payments; refunds are negative amounts.
select
    id as payment_id,
    order_id,
    payment_method,
    case when kind = 'refund' then -amount_cents else amount_cents end / 100.0 as amount
from {{ source('raw', 'shop_payments') }}
