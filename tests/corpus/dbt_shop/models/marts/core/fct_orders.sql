{{
    config(
        materialized='incremental',
        unique_key='order_id',
        incremental_strategy='merge',
        cluster_by=['order_date']
    )
}}

with orders as (

    select * from {{ ref('int_orders__with_payments') }}
    {% if is_incremental() %}
    where ordered_at >= (select dateadd(day, -3, max(ordered_at)) from {{ this }})
    {% endif %}

),

totals as (

    select * from {{ ref('int_order_totals') }}

),

delivery as (

    select
        order_id,
        min(shipped_at) as shipped_at,
        max(delivered_at) as delivered_at,
        max(hours_to_deliver) as hours_to_deliver
    from {{ ref('int_shipments__delivery_times') }}
    group by order_id

)

select
    orders.order_id,
    orders.customer_id,
    orders.store_id,
    orders.order_status,
    orders.order_date,
    orders.ordered_at,
    orders.country_code,
    orders.region,
    totals.item_count,
    totals.gross_revenue,
    totals.cost_of_goods,
    totals.gross_margin,
    orders.discount_amount,
    orders.shipping_cost,
    orders.total_paid,
    orders.refunded_amount,
    orders.net_paid,
    delivery.shipped_at,
    delivery.delivered_at,
    delivery.hours_to_deliver,
    row_number() over (partition by orders.customer_id order by orders.ordered_at) as customer_order_number
from orders
left join totals on orders.order_id = totals.order_id
left join delivery on orders.order_id = delivery.order_id
