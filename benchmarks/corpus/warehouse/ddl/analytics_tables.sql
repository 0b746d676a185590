-- Tables of the analytics schema that the billing procedures load.

create table analytics.fct_invoices (
    invoice_id        bigint primary key,
    account_id        bigint not null,
    subscription_id   bigint not null,
    issued_on         date not null,
    paid_on           date,
    days_to_pay       integer,
    subtotal_usd      numeric(18, 2) not null,
    tax_usd           numeric(18, 2) not null,
    total_usd         numeric(18, 2) not null,
    is_overdue        boolean not null
);

create table analytics.account_health (
    account_id            bigint primary key,
    active_seats          integer not null,
    mrr_usd               numeric(18, 2) not null,
    overdue_invoices      integer not null,
    churn_risk            varchar(10) not null,   -- low, medium, high
    refreshed_at          timestamp not null
);
