"""Pure SQL lineage extraction (no I/O): tables and columns read and written by SQL text.

Usage::

    from domain.lineage import extract_sql_lineage

    lineage = extract_sql_lineage("INSERT INTO t SELECT a FROM s", dialect="postgres")
    lineage.to_json()
    # {"sources": ["s"], "targets": ["t"], "columns": [{"source": "s.a", "target": "t.a"}]}
"""

from domain.lineage.dialects import SUPPORTED_DIALECTS
from domain.lineage.models import ColumnEdge, SqlLineage, StatementLineage, UnknownDialect
from domain.lineage.sql import extract_sql_lineage

__all__ = [
    "SUPPORTED_DIALECTS",
    "ColumnEdge",
    "SqlLineage",
    "StatementLineage",
    "UnknownDialect",
    "extract_sql_lineage",
]
