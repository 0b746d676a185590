-- Scores every account's churn risk from its seats, MRR and overdue invoices.
create or replace procedure analytics.refresh_account_health()
language plpgsql
as $$
begin
    truncate table analytics.account_health;

    insert into analytics.account_health (
        account_id, active_seats, mrr_usd, overdue_invoices, churn_risk, refreshed_at
    )
    with seats as (
        select account_id, sum(seats) as active_seats,
               sum(seats * monthly_price_per_seat) as mrr_usd
        from analytics.v_active_subscriptions
        group by account_id
    ),
    overdue as (
        select account_id, count(*) as overdue_invoices
        from analytics.fct_invoices
        where is_overdue
        group by account_id
    )
    select
        seats.account_id,
        seats.active_seats,
        seats.mrr_usd,
        coalesce(overdue.overdue_invoices, 0) as overdue_invoices,
        case
            when coalesce(overdue.overdue_invoices, 0) >= 2 then 'high'
            when seats.active_seats < 3 then 'medium'
            else 'low'
        end as churn_risk,
        current_timestamp as refreshed_at
    from seats
    left join overdue
        on overdue.account_id = seats.account_id;
end;
$$;
