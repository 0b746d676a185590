{{ config(materialized='table') }}

with spend as (

    select
        campaign_id,
        sum(spend) as spend,
        sum(impressions) as impressions,
        sum(clicks) as clicks
    from {{ ref('int_marketing__spend_daily') }}
    group by campaign_id

),

revenue as (

    select
        campaign_id,
        count(distinct order_id) as attributed_orders,
        sum(attributed_revenue) as attributed_revenue
    from {{ ref('fct_marketing_attribution') }}
    group by campaign_id

)

select
    campaigns.campaign_id,
    campaigns.campaign_name,
    campaigns.platform,
    campaigns.started_on,
    campaigns.ended_on,
    coalesce(spend.spend, 0) as spend,
    coalesce(spend.impressions, 0) as impressions,
    coalesce(spend.clicks, 0) as clicks,
    coalesce(revenue.attributed_orders, 0) as attributed_orders,
    coalesce(revenue.attributed_revenue, 0) as attributed_revenue,
    {{ safe_divide('revenue.attributed_revenue', 'spend.spend') }} as return_on_ad_spend
from {{ ref('stg_marketing__campaigns') }} as campaigns
left join spend on campaigns.campaign_id = spend.campaign_id
left join revenue on campaigns.campaign_id = revenue.campaign_id
