with stock as (
    select * from {{ ref('stg_inventory__stock_levels') }}
),

warehouses as (
    select * from {{ ref('stg_inventory__warehouses') }}
)

select
    stock.stock_date,
    stock.product_id,
    warehouses.country_code,
    sum(stock.quantity_on_hand) as quantity_on_hand,
    sum(stock.quantity_available) as quantity_available,
    count(distinct stock.warehouse_id) as warehouse_count
from stock
inner join warehouses
    on stock.warehouse_id = warehouses.warehouse_id
group by 1, 2, 3
