select
    campaign_id,
    campaign_name,
    case
        when lower(platform) in ('google', 'google_ads', 'adwords') then 'google'
        when lower(platform) in ('facebook', 'instagram', 'meta') then 'meta'
        else lower(platform)
    end as platform,
    lower(utm_campaign) as utm_campaign,
    objective,
    started_on,
    ended_on
from {{ source('marketing', 'campaigns') }}
