with source as (
    select * from {{ source('shop', 'order_items') }}
),

renamed as (
    select
        id as order_item_id,
        order_id,
        product_id,
        quantity,
        {{ cents_to_dollars('unit_price_cents') }} as unit_price,
        {{ cents_to_dollars('unit_discount_cents') }} as unit_discount,
        created_at
    from source
    where quantity > 0
)

select * from renamed
