select
    session_id,
    domain_userid as anonymous_id,
    user_id as customer_id,
    session_start_tstamp as session_started_at,
    session_end_tstamp as session_ended_at,
    coalesce(lower(utm_source), '(direct)') as utm_source,
    coalesce(lower(utm_medium), '(none)') as utm_medium,
    lower(utm_campaign) as utm_campaign,
    landing_page_url,
    device_type
from {{ source('web', 'sessions') }}
where session_start_tstamp is not null
