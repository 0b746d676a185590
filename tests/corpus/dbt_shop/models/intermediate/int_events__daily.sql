select
    event_date,
    platform,
    event_name,
    count(*) as event_count,
    count(distinct anonymous_id) as visitor_count,
    count(distinct customer_id) as customer_count
from {{ ref('stg_web__events') }}
group by 1, 2, 3
