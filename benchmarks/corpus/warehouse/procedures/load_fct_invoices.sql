-- Rebuilds analytics.fct_invoices from the raw invoices, converting every amount to USD.
create or replace procedure analytics.load_fct_invoices()
language plpgsql
as $$
begin
    delete from analytics.fct_invoices;

    insert into analytics.fct_invoices (
        invoice_id, account_id, subscription_id, issued_on, paid_on, days_to_pay,
        subtotal_usd, tax_usd, total_usd, is_overdue
    )
    with line_totals as (
        select
            invoice_id,
            sum(quantity * unit_amount_cents) / 100.0 as subtotal,
            sum(quantity * unit_amount_cents * tax_rate) / 100.0 as tax
        from billing_raw.invoice_lines
        group by invoice_id
    )
    select
        i.invoice_id,
        s.account_id,
        i.subscription_id,
        i.issued_on,
        i.paid_on,
        i.paid_on - i.issued_on as days_to_pay,
        t.subtotal * fx.usd_per_unit as subtotal_usd,
        t.tax * fx.usd_per_unit as tax_usd,
        (t.subtotal + t.tax) * fx.usd_per_unit as total_usd,
        i.paid_on is null and i.due_on < current_date as is_overdue
    from billing_raw.invoices as i
    inner join line_totals as t
        on t.invoice_id = i.invoice_id
    inner join billing_raw.subscriptions as s
        on s.subscription_id = i.subscription_id
    inner join billing_raw.fx_rates as fx
        on fx.currency = i.currency
       and fx.rate_date = i.issued_on
    where i.status <> 'void';
end;
$$;
