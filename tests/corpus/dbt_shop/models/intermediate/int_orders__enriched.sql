with orders as (

    select * from {{ ref('stg_shop__orders') }}

),

stores as (

    select * from {{ ref('stg_shop__stores') }}

),

countries as (

    select * from {{ ref('country_codes') }}

)

select
    orders.order_id,
    orders.customer_id,
    orders.store_id,
    stores.store_name,
    stores.is_online,
    orders.order_status,
    orders.country_code,
    countries.country_name,
    countries.region,
    orders.shipping_cost,
    orders.discount_amount,
    orders.ordered_at,
    cast(orders.ordered_at as date) as order_date
from orders
left join stores
    on orders.store_id = stores.store_id
left join countries
    on orders.country_code = countries.iso_code
