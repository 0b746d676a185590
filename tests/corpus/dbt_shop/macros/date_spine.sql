{#- A calendar from start_date to end_date, one row per day, column `date_day`. -#}
{% macro date_spine(start_date, end_date) -%}
    (
        select dateadd(day, seq4(), '{{ start_date }}'::date) as date_day
        from table(generator(rowcount => 5000))
        qualify date_day <= '{{ end_date }}'::date
    )
{%- endmacro %}
