with source as (

    select * from {{ source('shop', 'orders') }}

),

renamed as (

    select
        id as order_id,
        user_id as customer_id,
        store_id,
        lower(status) as order_status,
        shipping_country as country_code,
        {{ cents_to_dollars('shipping_cost_cents') }} as shipping_cost,
        {{ cents_to_dollars('discount_cents') }} as discount_amount,
        created_at as ordered_at,
        updated_at,
        _fivetran_deleted as is_deleted
    from source

)

select * from renamed
where not is_deleted
