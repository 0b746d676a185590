with stores as (
    select * from {{ source('shop', 'stores') }}
)

select
    id as store_id,
    name as store_name,
    store_type,
    country_code,
    city,
    manager_employee_id,
    opened_at::date as opened_on,
    case when store_type = 'web' then true else false end as is_online
from stores
