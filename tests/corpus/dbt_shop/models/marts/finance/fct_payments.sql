{{ config(alias='payments') }}

select
    payments.payment_id,
    payments.order_id,
    orders.customer_id,
    orders.store_id,
    orders.order_date,
    payments.payment_method,
    mapping.payment_method_group,
    payments.payment_status,
    payments.amount,
    payments.created_at
from {{ ref('stg_stripe__payments') }} as payments
left join {{ ref('int_orders__enriched') }} as orders
    on payments.order_id = orders.order_id
left join {{ ref('payment_method_mapping') }} as mapping
    on payments.payment_method = mapping.payment_method
