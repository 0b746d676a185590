with shipments as (

    select * from {{ ref('stg_inventory__shipments') }}

),

orders as (

    select order_id, ordered_at from {{ ref('stg_shop__orders') }}

)

select
    shipments.shipment_id,
    shipments.order_id,
    shipments.warehouse_id,
    shipments.carrier,
    orders.ordered_at,
    shipments.shipped_at,
    shipments.delivered_at,
    datediff('hour', orders.ordered_at, shipments.shipped_at) as hours_to_ship,
    shipments.hours_in_transit,
    datediff('hour', orders.ordered_at, shipments.delivered_at) as hours_to_deliver
from shipments
inner join orders
    on shipments.order_id = orders.order_id
