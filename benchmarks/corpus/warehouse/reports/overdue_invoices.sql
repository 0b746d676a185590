-- Open invoices past their due date, largest first, for the collections team.
select
    a.account_name,
    a.segment,
    f.invoice_id,
    f.issued_on,
    f.total_usd,
    current_date - i.due_on as days_overdue
from analytics.fct_invoices as f
inner join billing_raw.invoices as i
    on i.invoice_id = f.invoice_id
inner join billing_raw.accounts as a
    on a.account_id = f.account_id
where f.is_overdue
order by f.total_usd desc;
