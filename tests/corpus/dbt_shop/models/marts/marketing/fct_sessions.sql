{{
    config(
        materialized='incremental',
        unique_key='session_id',
        on_schema_change='sync_all_columns'
    )
}}

with sessions as (

    select * from {{ ref('int_sessions__attributed') }}
    {% if is_incremental() %}
    where session_started_at > (select max(session_started_at) from {{ this }})
    {% endif %}

),

page_views as (

    select
        session_id,
        count(*) as page_view_count,
        sum(engaged_seconds) as engaged_seconds,
        max(page_view_in_session) as max_depth
    from {{ ref('int_page_views__sessionized') }}
    group by session_id

)

select
    sessions.session_id,
    sessions.anonymous_id,
    sessions.customer_id,
    sessions.session_started_at,
    sessions.channel,
    sessions.channel_group,
    sessions.utm_campaign,
    sessions.device_type,
    coalesce(page_views.page_view_count, 0) as page_view_count,
    coalesce(page_views.engaged_seconds, 0) as engaged_seconds,
    page_views.max_depth,
    coalesce(page_views.page_view_count, 0) <= 1 as is_bounce
from sessions
left join page_views
    on sessions.session_id = page_views.session_id
