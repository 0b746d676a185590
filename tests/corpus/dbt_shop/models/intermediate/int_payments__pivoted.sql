{%- set payment_methods = var('payment_methods') -%}

with payments as (

    select * from {{ ref('stg_stripe__payments') }}
    where payment_status = 'success'

),

method_groups as (

    select * from {{ ref('payment_method_mapping') }}

)

select
    payments.order_id,
    {% for payment_method in payment_methods -%}
    sum(case when payments.payment_method = '{{ payment_method }}' then payments.amount else 0 end)
        as {{ payment_method }}_amount,
    {% endfor -%}
    sum(case when method_groups.is_card then payments.amount else 0 end) as card_amount,
    sum(payments.amount) as total_paid,
    count(*) as payment_count,
    min(payments.created_at) as first_paid_at
from payments
left join method_groups
    on payments.payment_method = method_groups.payment_method
group by 1
