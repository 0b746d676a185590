{% snapshot customers_snapshot %}

{{
    config(
        target_schema='snapshots',
        unique_key='id',
        strategy='timestamp',
        updated_at='updated_at',
        invalidate_hard_deletes=True
    )
}}

select
    id,
    first_name,
    last_name,
    email,
    country,
    marketing_opt_in,
    updated_at
from {{ source('shop', 'customers') }}

{% endsnapshot %}
