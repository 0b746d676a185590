-- Monthly recurring revenue (MRR) and annual run rate (ARR) per customer segment.
create or replace view analytics.v_mrr_by_segment as
with subscription_mrr as (
    select
        subscription_id,
        account_id,
        seats * monthly_price_per_seat as mrr_usd
    from analytics.v_active_subscriptions
),
account_mrr as (
    select
        a.account_id,
        a.segment,
        sum(m.mrr_usd) as mrr_usd
    from subscription_mrr as m
    inner join billing_raw.accounts as a
        on a.account_id = m.account_id
    group by a.account_id, a.segment
)
select
    segment,
    count(*) as paying_accounts,
    sum(mrr_usd) as mrr_usd,
    sum(mrr_usd) * 12 as arr_usd
from account_mrr
group by segment;
