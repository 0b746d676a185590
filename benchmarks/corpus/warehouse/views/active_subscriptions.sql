-- Subscriptions that are running today, with their plan's monthly price per seat.
create or replace view analytics.v_active_subscriptions as
select
    s.subscription_id,
    s.account_id,
    s.plan_id,
    p.plan_name,
    s.seats,
    s.started_at,
    case
        when p.billing_period = 'year' then p.list_price_cents / 12.0 / 100
        else p.list_price_cents / 100.0
    end * (1 - s.discount_pct / 100) as monthly_price_per_seat
from billing_raw.subscriptions as s
inner join billing_raw.plans as p
    on p.plan_id = s.plan_id
where s.cancelled_at is null
  and not p.is_legacy;
