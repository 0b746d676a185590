{{ config(materialized='incremental', unique_key='order_item_id') }}

select
    items.order_item_id,
    items.order_id,
    orders.customer_id,
    cast(orders.ordered_at as date) as order_date,
    items.product_id,
    items.category,
    items.quantity,
    items.unit_price,
    items.line_revenue,
    items.line_cost,
    items.line_margin
from {{ ref('int_order_items__priced') }} as items
inner join {{ ref('stg_shop__orders') }} as orders
    on items.order_id = orders.order_id
{% if is_incremental() %}
where orders.updated_at > (select max(order_date) from {{ this }})
{% endif %}
