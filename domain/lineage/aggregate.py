"""Union of statement lineages, passing lineage through temporary tables."""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.lineage.columns import STAR, SourceColumn
from domain.lineage.names import TableRef

ColumnPair = tuple[SourceColumn, SourceColumn]
Leaf = tuple[list[TableRef], list[TableRef], list[ColumnPair]]


class TemporaryTables:
    """Keys of the tables a script declares temporary (plus ``#t``/``@t`` by name)."""

    def __init__(self) -> None:
        self._keys: set[str] = set()

    def add_all(self, refs: list[TableRef]) -> None:
        """Remember tables declared temporary by a statement."""
        self._keys.update(ref.key for ref in refs)

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, TableRef) and (ref.temporary or ref.key in self._keys)


@dataclass
class Aggregate:
    """Real (non-temporary) tables read and written, and column edges between them."""

    sources: list[TableRef] = field(default_factory=list)
    targets: list[TableRef] = field(default_factory=list)
    edges: list[ColumnPair] = field(default_factory=list)


def aggregate(leaves: list[Leaf], temporary: TemporaryTables) -> Aggregate:
    """Union statement results in order; temporary tables vanish, their lineage stays."""
    total = Aggregate()
    seen_sources: set[str] = set()
    seen_targets: set[str] = set()
    flow = _TemporaryFlow(temporary)
    for sources, targets, edges in leaves:
        for ref in sources:
            if ref not in temporary and ref.name not in seen_sources:
                seen_sources.add(ref.name)
                total.sources.append(ref)
        for ref in targets:
            if ref not in temporary and ref.name not in seen_targets:
                seen_targets.add(ref.name)
                total.targets.append(ref)
        for source, target in edges:
            flow.add(source, target)
    total.edges = list(dict.fromkeys(flow.edges))
    return total


class _TemporaryFlow:
    """Replaces edges into and out of temporary tables by edges between real tables."""

    def __init__(self, temporary: TemporaryTables) -> None:
        self.temporary = temporary
        self.edges: list[ColumnPair] = []
        # (temporary table key, column key) -> (column name, real sources)
        self._into: dict[tuple[str, str], tuple[str, set[SourceColumn]]] = {}

    def add(self, source: SourceColumn, target: SourceColumn) -> None:
        if source.table in self.temporary and source.is_star:
            self._from_temporary_star(source, target)
            return
        for real in self._real_sources(source):
            self._emit(real, target)

    def _from_temporary_star(self, source: SourceColumn, target: SourceColumn) -> None:
        for (table_key, _), (name, reals) in list(self._into.items()):
            if table_key != source.table.key:
                continue
            renamed = target.is_star and name != STAR
            column = SourceColumn(target.table, name) if renamed else target
            for real in reals:
                self._emit(real, column)

    def _real_sources(self, source: SourceColumn) -> set[SourceColumn]:
        if source.table not in self.temporary:
            return {source}
        key = source.table.key
        reals = set(self._into.get((key, source.column.lower()), ("", set()))[1])
        for star_source in self._into.get((key, STAR), ("", set()))[1]:
            if star_source.is_star:
                reals.add(SourceColumn(star_source.table, source.column))
        return reals

    def _emit(self, source: SourceColumn, target: SourceColumn) -> None:
        if target.table not in self.temporary:
            self.edges.append((source, target))
            return
        slot = (target.table.key, target.column.lower())
        self._into.setdefault(slot, (target.column, set()))[1].add(source)
