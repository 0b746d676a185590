-- Raw billing tables, loaded every hour by the billing system's CDC feed.

create table billing_raw.accounts (
    account_id      bigint primary key,
    account_name    varchar(200) not null,
    segment         varchar(20),          -- smb, mid_market or enterprise
    country_code    char(2),
    created_at      timestamp not null
);

create table billing_raw.plans (
    plan_id             integer primary key,
    plan_name           varchar(100) not null,
    billing_period      varchar(10) not null,  -- month or year
    list_price_cents    integer not null,
    is_legacy           boolean default false
);

create table billing_raw.subscriptions (
    subscription_id   bigint primary key,
    account_id        bigint not null references billing_raw.accounts (account_id),
    plan_id           integer not null references billing_raw.plans (plan_id),
    seats             integer not null,
    discount_pct      numeric(5, 2) default 0,
    started_at        timestamp not null,
    cancelled_at      timestamp,
    cancel_reason     varchar(100)
);

create table billing_raw.invoices (
    invoice_id        bigint primary key,
    subscription_id   bigint not null,
    issued_on         date not null,
    due_on            date not null,
    paid_on           date,
    currency          char(3) not null,
    status            varchar(20) not null    -- draft, open, paid, void, uncollectible
);

create table billing_raw.invoice_lines (
    invoice_line_id   bigint primary key,
    invoice_id        bigint not null,
    line_type         varchar(20) not null,   -- seat, overage, credit
    quantity          integer not null,
    unit_amount_cents integer not null,
    tax_rate          numeric(6, 4) not null
);

create table billing_raw.fx_rates (
    rate_date     date not null,
    currency      char(3) not null,
    usd_per_unit  numeric(18, 8) not null,
    primary key (rate_date, currency)
);
