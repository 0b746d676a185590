select
    stores.store_id,
    stores.store_name,
    stores.store_type,
    stores.is_online,
    stores.city,
    stores.country_code,
    countries.country_name,
    countries.region,
    countries.currency_code,
    stores.opened_on,
    managers.full_name as manager_name
from {{ ref('stg_shop__stores') }} as stores
left join {{ ref('stg_hr__employees') }} as managers
    on stores.manager_employee_id = managers.employee_id
    and managers.is_active
left join {{ ref('country_codes') }} as countries
    on stores.country_code = countries.iso_code
