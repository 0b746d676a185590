with payments as (

    select * from {{ source('stripe', 'payments') }}

),

final as (

    select
        id as payment_id,
        orderid as order_id,
        lower(paymentmethod) as payment_method,
        status as payment_status,
        {{ cents_to_dollars('amount') }} as amount,
        created as created_at
    from payments

)

select * from final
