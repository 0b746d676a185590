-- Singular test: an order can never have a negative net amount.
select order_id, net_paid
from {{ ref('fct_orders') }}
where net_paid < 0
