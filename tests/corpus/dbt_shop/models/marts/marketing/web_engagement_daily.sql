{{ config(materialized='table', tags=['web']) }}
-- depends_on: {{ ref('dim_dates') }}

{%- set platforms = ['web', 'mobile', 'app'] %}

with events as (

    select * from {{ ref('int_events__daily') }}

),

sessions as (

    select
        cast(session_started_at as date) as session_date,
        count(*) as session_count,
        avg(case when is_bounce then 1.0 else 0.0 end) as bounce_rate
    from {{ ref('fct_sessions') }}
    group by 1

)

select
    events.event_date,
    {% for platform in platforms %}
    sum(case when events.platform = '{{ platform }}' then events.event_count else 0 end) as {{ platform }}_events,
    {% endfor %}
    sum(events.event_count) as total_events,
    max(sessions.session_count) as session_count,
    max(sessions.bounce_rate) as bounce_rate
from events
left join sessions
    on events.event_date = sessions.session_date
group by events.event_date
