with items as (
    select * from {{ ref('stg_shop__order_items') }}
),

products as (
    select * from {{ ref('stg_shop__products') }}
)

select
    items.order_item_id,
    items.order_id,
    items.product_id,
    products.category,
    items.quantity,
    items.unit_price,
    items.unit_discount,
    products.unit_cost,
    items.quantity * (items.unit_price - items.unit_discount) as line_revenue,
    items.quantity * products.unit_cost as line_cost,
    items.quantity * (items.unit_price - items.unit_discount - products.unit_cost) as line_margin
from items
inner join products
    on items.product_id = products.product_id
