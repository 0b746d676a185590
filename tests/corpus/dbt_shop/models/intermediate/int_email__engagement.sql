with sends as (
    select * from {{ ref('stg_marketing__email_sends') }}
),

customers as (
    select customer_id, email from {{ ref('stg_shop__customers') }}
)

select
    customers.customer_id,
    count(*) as emails_received,
    sum(case when sends.is_opened then 1 else 0 end) as emails_opened,
    sum(case when sends.is_clicked then 1 else 0 end) as emails_clicked,
    max(sends.sent_at) as last_email_sent_at,
    bool_or(sends.unsubscribed) as has_unsubscribed
from sends
inner join customers
    on sends.recipient_email = customers.email
group by customers.customer_id
