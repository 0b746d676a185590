{{
    config(
        materialized='incremental',
        unique_key='event_id',
        incremental_strategy='merge',
        on_schema_change='append_new_columns'
    )
}}

with events as (

    select * from {{ source('web', 'events') }}

    {% if is_incremental() %}
    -- only new events since the last run, with a 3 hour overlap for late arrivals
    where derived_tstamp > (select dateadd(hour, -3, max(occurred_at)) from {{ this }})
    {% endif %}

)

select
    event_id,
    session_id,
    domain_userid as anonymous_id,
    user_id as customer_id,
    event_name,
    lower(platform) as platform,
    derived_tstamp as occurred_at,
    date_trunc('day', derived_tstamp) as event_date
from events
