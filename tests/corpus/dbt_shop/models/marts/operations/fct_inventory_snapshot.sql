{{ config(materialized='incremental', unique_key=['stock_date', 'product_id', 'country_code']) }}

select
    stock.stock_date,
    stock.product_id,
    products.product_name,
    products.category,
    stock.country_code,
    stock.quantity_on_hand,
    stock.quantity_available,
    stock.quantity_available * products.unit_cost as stock_value_at_cost,
    avg(stock.quantity_available) over (
        partition by stock.product_id, stock.country_code
        order by stock.stock_date
        rows between 6 preceding and current row
    ) as quantity_available_7d_avg
from {{ ref('int_inventory__daily_stock') }} as stock
inner join {{ ref('dim_products') }} as products
    on stock.product_id = products.product_id
{% if is_incremental() %}
where stock.stock_date > (select max(stock_date) from {{ this }})
{% endif %}
