"""Reading a FileLineage by node names, for readable assertions."""

from __future__ import annotations

from dataclasses import dataclass

from domain.graph import FileLineage, LineageEdge, LineageNode, Rel


@dataclass
class View:
    """A FileLineage indexed by node name."""

    lineage: FileLineage

    @property
    def by_urn(self) -> dict[str, LineageNode]:
        return {node.urn: node for node in self.lineage.nodes}

    def node(self, name: str) -> LineageNode:
        found = [node for node in self.lineage.nodes if node.name == name]
        assert found, f"no node named {name!r}; have {sorted(n.name for n in self.lineage.nodes)}"
        return found[0]

    def has_node(self, name: str) -> bool:
        return any(node.name == name for node in self.lineage.nodes)

    def pairs(self, rel: Rel) -> set[tuple[str, str]]:
        """(source name, target name) of every edge of one relation."""
        nodes = self.by_urn
        return {
            (nodes[edge.source].name, nodes[edge.target].name)
            for edge in self.lineage.edges
            if edge.rel == rel
        }

    def edge(self, rel: Rel, source: str, target: str) -> LineageEdge:
        nodes = self.by_urn
        for edge in self.lineage.edges:
            if (
                edge.rel == rel
                and nodes[edge.source].name == source
                and nodes[edge.target].name == target
            ):
                return edge
        raise AssertionError(f"no {rel} edge {source} -> {target}; have {self.pairs(rel)}")

    def name_of(self, urn: str | None) -> str | None:
        return None if urn is None else self.by_urn[urn].name

    def check_integrity(self) -> None:
        """Every edge joins two nodes of the file, with a sane line range."""
        nodes = self.by_urn
        for edge in self.lineage.edges:
            assert edge.source in nodes and edge.target in nodes, edge
            assert 1 <= edge.line_start <= edge.line_end, edge
            assert edge.source != edge.target, edge
            if edge.via is not None:
                assert edge.via in nodes, edge
        ids = [edge.edge_id for edge in self.lineage.edges]
        assert len(ids) == len(set(ids)), "duplicate edges"
        urns = [node.urn for node in self.lineage.nodes]
        assert len(urns) == len(set(urns)), "duplicate nodes"
