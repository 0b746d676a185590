-- Staging: one row per order, cleaned from the raw shop export.
select
    id as order_id,
    customer_id,
    cast(ordered_at as date) as order_date,
    status,
    amount_cents / 100.0 as amount
from {{ source('raw', 'shop_orders') }}
where status != 'test'
