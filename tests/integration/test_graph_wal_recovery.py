"""A crash mid-write can tear LadybugDB's write-ahead log; the graph read model must still open
(at its last checkpoint) so the catch-up can rebuild it from the events, instead of the service
refusing to start."""

from __future__ import annotations

import logging
import shutil

import pytest

from adapters.graph_ladybug import LadybugGraphStore

pytestmark = pytest.mark.integration


def test_a_torn_write_ahead_log_is_set_aside_and_the_graph_opens(tmp_path, caplog):
    live = LadybugGraphStore(tmp_path / "live" / "graph")
    live.ensure()
    for position in range(1, 40):
        live.save_checkpoint("graph", position)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    # What a SIGKILL leaves: the files as they are mid-flight, the log's tail half written.
    for name in ("graph", "graph.wal"):
        shutil.copy(tmp_path / "live" / name, crashed / name)
    live.close()
    wal = crashed / "graph.wal"
    data = bytearray(wal.read_bytes())
    assert len(data) > 64, "the writes are still in the log (not checkpointed)"
    for i in range(len(data) // 2, len(data)):
        data[i] ^= 0xFF
    wal.write_bytes(bytes(data))

    with caplog.at_level(logging.ERROR, logger="adapters.graph_ladybug"):
        store = LadybugGraphStore(crashed / "graph")
        store.ensure()
    try:
        assert store.checkpoint("graph") < 39  # back to the last checkpoint: catch-up redoes
        store.save_checkpoint("graph", 40)  # and the store takes writes again
        assert store.checkpoint("graph") == 40
        assert any("could not be opened" in r.getMessage() for r in caplog.records)
        assert list(crashed.glob("graph*.corrupt-*"))
    finally:
        store.close()
