select
    order_id,
    count(*) as item_count,
    sum(quantity) as unit_count,
    sum(line_revenue) as gross_revenue,
    sum(line_cost) as cost_of_goods,
    sum(line_margin) as gross_margin,
    {{ safe_divide('sum(line_margin)', 'sum(line_revenue)') }} as margin_rate
from {{ ref('int_order_items__priced') }}
group by order_id
