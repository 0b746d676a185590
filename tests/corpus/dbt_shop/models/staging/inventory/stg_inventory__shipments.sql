with shipments as (

    select * from {{ source('inventory', 'shipments') }}

)

select
    shipment_id,
    order_id,
    warehouse_id,
    lower(carrier) as carrier,
    shipped_at,
    delivered_at,
    datediff('hour', shipped_at, delivered_at) as hours_in_transit
from shipments
