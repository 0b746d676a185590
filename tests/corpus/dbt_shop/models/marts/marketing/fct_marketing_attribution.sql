{#- Last-touch attribution: each order is credited to the customer's latest session before it. -#}
with orders as (

    select order_id, customer_id, ordered_at, net_paid
    from {{ ref('fct_orders') }}

),

sessions as (

    select session_id, customer_id, session_started_at, channel, utm_campaign
    from {{ ref('fct_sessions') }}
    where customer_id is not null

),

touches as (

    select
        orders.order_id,
        orders.net_paid,
        orders.ordered_at,
        sessions.session_id,
        sessions.channel,
        sessions.utm_campaign,
        row_number() over (
            partition by orders.order_id
            order by sessions.session_started_at desc
        ) as touch_rank
    from orders
    inner join sessions
        on orders.customer_id = sessions.customer_id
        and sessions.session_started_at <= orders.ordered_at
        and sessions.session_started_at > dateadd(day, -30, orders.ordered_at)

)

select
    touches.order_id,
    touches.session_id,
    touches.channel,
    touches.utm_campaign,
    spend.campaign_id,
    cast(touches.ordered_at as date) as order_date,
    touches.net_paid as attributed_revenue
from touches
left join (
    select distinct campaign_id, utm_campaign from {{ ref('int_marketing__spend_daily') }}
) as spend
    on touches.utm_campaign = spend.utm_campaign
where touches.touch_rank = 1
