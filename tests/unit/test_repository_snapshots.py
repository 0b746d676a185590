"""Deleting files, and repository snapshots that delete what a source no longer holds."""

from __future__ import annotations

import pytest

from commands.models import DeleteFile, IngestFile, RecordRepositorySnapshot
from projections.rebuild import catch_up
from projections.vectors import VectorsProjection

pytestmark = pytest.mark.unit


def _ingest(app, path, content="select 1"):
    return app.ingest_file(IngestFile(project_id="p", path=path, content=content))


def test_deleting_a_file_records_file_deleted_and_drops_its_chunks(
    memory_app, embedder, memory_index
):
    projection = VectorsProjection(embedder, memory_index)
    projection.start()
    _ingest(memory_app, "a.sql")
    _ingest(memory_app, "b.sql")
    catch_up(projection, memory_app)

    result = memory_app.delete_file(DeleteFile(project_id="p", path="a.sql"))
    catch_up(projection, memory_app)

    assert result.changed
    assert memory_app.read(result.position - 1, 1)[0].event_type == "FileDeleted"
    assert [p.payload["path"] for p in memory_index.dump()] == ["b.sql"]


def test_deleting_an_unknown_or_deleted_file_records_nothing(memory_app):
    _ingest(memory_app, "a.sql")
    memory_app.delete_file(DeleteFile(project_id="p", path="a.sql"))
    head = memory_app.max_position()
    assert not memory_app.delete_file(DeleteFile(project_id="p", path="a.sql")).changed
    assert not memory_app.delete_file(DeleteFile(project_id="p", path="nope.sql")).changed
    assert memory_app.max_position() == head


def test_a_deleted_file_ingested_again_is_recorded_again(memory_app):
    _ingest(memory_app, "a.sql")
    memory_app.delete_file(DeleteFile(project_id="p", path="a.sql"))
    assert _ingest(memory_app, "a.sql").changed


def test_a_snapshot_deletes_the_files_the_source_no_longer_holds(memory_app):
    for path in ("a.sql", "b.sql", "c.sql"):
        _ingest(memory_app, path)
    snapshot = RecordRepositorySnapshot(
        project_id="p", source="git@x", commit="abc", paths=("a.sql", "b.sql", "c.sql")
    )
    first = memory_app.record_repository_snapshot(snapshot)
    assert first.deleted == ()

    second = memory_app.record_repository_snapshot(
        snapshot.model_copy(update={"commit": "def", "paths": ("a.sql",)})
    )

    assert second.deleted == ("b.sql", "c.sql")
    events = memory_app.read(first.position, 100)
    assert sorted(e.payload["path"] for e in events if e.event_type == "FileDeleted") == [
        "b.sql",
        "c.sql",
    ]
    recorded = [e for e in events if e.event_type == "RepositorySnapshotRecorded"]
    assert recorded[0].payload["commit"] == "def"
    assert recorded[0].payload["deleted"] == ["b.sql", "c.sql"]
