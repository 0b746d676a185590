{#
    Converts an integer amount of cents into a decimal amount of dollars.
    Usage: {{ cents_to_dollars('amount_cents') }}
#}
{% macro cents_to_dollars(column_name, scale=2) -%}
    round(({{ column_name }} / 100.0)::numeric(16, {{ scale }}), {{ scale }})
{%- endmacro %}
