-- Monthly signup cohorts and how many of their subscriptions were cancelled, and why.
create table analytics.churn_cohorts as
with cohorts as (
    select
        subscription_id,
        account_id,
        date_trunc('month', started_at) as cohort_month
    from billing_raw.subscriptions
),
cancellations as (
    select
        subscription_id,
        date_trunc('month', cancelled_at) as churn_month,
        coalesce(cancel_reason, 'unknown') as cancel_reason
    from billing_raw.subscriptions
    where cancelled_at is not null
)
select
    cohorts.cohort_month,
    cancellations.cancel_reason,
    count(distinct cohorts.subscription_id) as subscriptions,
    count(distinct cancellations.subscription_id) as churned_subscriptions
from cohorts
left join cancellations
    on cancellations.subscription_id = cohorts.subscription_id
group by cohorts.cohort_month, cancellations.cancel_reason;
