"""Nightly export of the customer summary to the finance team's warehouse."""

import pandas as pd
from sqlalchemy import create_engine, text


def export_customer_summary(warehouse_url: str, finance_url: str) -> int:
    """Copy customer_summary into finance.customer_ltv."""
    source = create_engine(warehouse_url)
    frame = pd.read_sql(text("select * from customer_summary"), source)
    frame.to_sql("customer_ltv", create_engine(finance_url), schema="finance", if_exists="replace")
    return len(frame)
