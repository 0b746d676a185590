-- Ad-hoc analysis: top 10 customers per region by lifetime value.
select
    stores.region,
    customers.customer_id,
    customers.lifetime_value,
    rank() over (partition by stores.region order by customers.lifetime_value desc) as value_rank
from {{ ref('dim_customers') }} as customers
left join {{ ref('dim_stores') }} as stores
    on customers.favourite_store_id = stores.store_id
qualify value_rank <= 10
