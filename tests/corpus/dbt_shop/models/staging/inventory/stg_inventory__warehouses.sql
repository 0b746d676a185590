select
    id as warehouse_id,
    code as warehouse_code,
    name as warehouse_name,
    country_code,
    capacity_units
from {{ source('inventory', 'warehouses') }}
where is_active
