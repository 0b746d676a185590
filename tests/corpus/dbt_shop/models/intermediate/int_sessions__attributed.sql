with sessions as (
    select * from {{ ref('stg_web__sessions') }}
),

channels as (
    select * from {{ ref('channel_mapping') }}
)

select
    sessions.session_id,
    sessions.anonymous_id,
    sessions.customer_id,
    sessions.session_started_at,
    sessions.session_ended_at,
    sessions.utm_source,
    sessions.utm_medium,
    sessions.utm_campaign,
    coalesce(channels.channel, 'other') as channel,
    coalesce(channels.channel_group, 'other') as channel_group,
    sessions.device_type
from sessions
left join channels
    on sessions.utm_source = channels.utm_source
    and sessions.utm_medium = channels.utm_medium
