{{ config(materialized='incremental', unique_key='page_view_id') }}

with page_views as (

    select * from {{ ref('stg_web__page_views') }}
    {% if is_incremental() %}
    where viewed_at >= (select max(viewed_at) from {{ this }})
    {% endif %}

)

select
    page_view_id,
    session_id,
    anonymous_id,
    page_path,
    viewed_at,
    engaged_seconds,
    row_number() over (partition by session_id order by viewed_at) as page_view_in_session,
    lag(page_path) over (partition by session_id order by viewed_at) as previous_page_path,
    lead(viewed_at) over (partition by session_id order by viewed_at) as next_viewed_at
from page_views
