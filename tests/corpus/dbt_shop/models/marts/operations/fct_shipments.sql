select
    shipments.shipment_id,
    shipments.order_id,
    shipments.carrier,
    shipments.warehouse_id,
    stores.store_id,
    stores.region,
    shipments.shipped_at,
    shipments.delivered_at,
    shipments.hours_to_ship,
    shipments.hours_to_deliver,
    shipments.hours_to_deliver > 72 as is_late
from {{ ref('int_shipments__delivery_times') }} as shipments
left join {{ ref('stg_shop__orders') }} as orders
    on shipments.order_id = orders.order_id
left join {{ ref('dim_stores') }} as stores
    on orders.store_id = stores.store_id
