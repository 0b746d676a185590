select
    warehouse_id,
    product_id,
    snapshot_date as stock_date,
    quantity_on_hand,
    quantity_reserved,
    quantity_on_hand - quantity_reserved as quantity_available
from {{ source('inventory', 'stock_levels') }}
