with spend as (

    select * from {{ ref('stg_marketing__ad_spend') }}

),

campaigns as (

    select * from {{ ref('stg_marketing__campaigns') }}

)

select
    spend.spend_date,
    campaigns.platform,
    campaigns.campaign_id,
    campaigns.utm_campaign,
    sum(spend.impressions) as impressions,
    sum(spend.clicks) as clicks,
    sum(spend.spend) as spend,
    {{ safe_divide('sum(spend.spend)', 'sum(spend.clicks)') }} as cost_per_click
from spend
inner join campaigns
    on spend.campaign_id = campaigns.campaign_id
group by 1, 2, 3, 4
