with page_views as (
    select * from {{ source('web', 'page_views') }}
)

select
    page_view_id,
    session_id,
    domain_userid as anonymous_id,
    page_url,
    split_part(page_url, '?', 1) as page_path,
    page_title,
    derived_tstamp as viewed_at,
    engaged_time_in_s as engaged_seconds
from page_views
