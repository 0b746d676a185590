with engagement as (

    select * from {{ ref('int_email__engagement') }}

)

select
    engagement.customer_id,
    engagement.emails_received,
    engagement.emails_opened,
    engagement.emails_clicked,
    {{ safe_divide('engagement.emails_opened', 'engagement.emails_received') }} as open_rate,
    engagement.has_unsubscribed
    {%- if target.name == 'prod' %},
    orders.order_count_after_email
    {%- endif %}
from engagement
{% if target.name == 'prod' %}
left join (
    select
        customer_id,
        count(*) as order_count_after_email
    from {{ ref('fct_orders') }}
    group by customer_id
) as orders
    on engagement.customer_id = orders.customer_id
{% endif %}
