select
    id as product_id,
    sku,
    name as product_name,
    lower(category) as category,
    lower(coalesce(subcategory, 'other')) as subcategory,
    {{ cents_to_dollars('price_cents') }} as list_price,
    {{ cents_to_dollars('cost_cents') }} as unit_cost,
    is_active,
    created_at
from {{ source('shop', 'products') }}
