with spend as (
    select * from {{ source('marketing', 'ad_spend') }}
)

select
    campaign_id,
    spend_date,
    lower(platform) as platform,
    impressions,
    clicks,
    {{ cents_to_dollars('spend_micros / 10000') }} as spend
from spend
where spend_date >= '{{ var("start_date") }}'
