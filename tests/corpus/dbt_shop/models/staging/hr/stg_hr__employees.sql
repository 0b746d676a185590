select
    id as employee_id,
    first_name || ' ' || last_name as full_name,
    job_title,
    department,
    store_id,
    hired_on,
    terminated_on,
    terminated_on is null as is_active
from {{ source('hr', 'employees') }}
