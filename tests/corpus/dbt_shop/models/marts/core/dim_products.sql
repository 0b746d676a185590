with products as (
    select * from {{ ref('stg_shop__products') }}
),

latest_stock as (
    select
        product_id,
        sum(quantity_available) as quantity_available
    from {{ ref('int_inventory__daily_stock') }}
    where stock_date = (select max(stock_date) from {{ ref('int_inventory__daily_stock') }})
    group by product_id
)

select
    products.product_id,
    products.sku,
    products.product_name,
    products.category,
    products.subcategory,
    products.list_price,
    products.unit_cost,
    products.list_price - products.unit_cost as unit_margin,
    products.is_active,
    coalesce(latest_stock.quantity_available, 0) as quantity_available,
    coalesce(latest_stock.quantity_available, 0) = 0 as is_out_of_stock
from products
left join latest_stock
    on products.product_id = latest_stock.product_id
