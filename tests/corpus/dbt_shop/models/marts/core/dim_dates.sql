{{ config(materialized='table') }}

with spine as (

    select date_day from {{ date_spine(var('start_date'), '2030-12-31') }}

),

holidays as (

    select * from {{ ref('holidays') }}
    where country_code = 'US'

)

select
    spine.date_day,
    extract(year from spine.date_day) as year_number,
    extract(quarter from spine.date_day) as quarter_number,
    extract(month from spine.date_day) as month_number,
    date_trunc('week', spine.date_day) as week_start,
    date_trunc('month', spine.date_day) as month_start,
    dayofweekiso(spine.date_day) as iso_day_of_week,
    dayofweekiso(spine.date_day) in (6, 7) as is_weekend,
    holidays.holiday_name,
    holidays.holiday_date is not null as is_holiday
from spine
left join holidays
    on spine.date_day = holidays.holiday_date
