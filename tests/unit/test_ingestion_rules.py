"""The write-side rules for IngestFile, on the in-memory event store."""

from __future__ import annotations

import pytest

from commands.application import UpstreamApplication
from commands.models import IngestFile
from domain.errors import BinaryContent, ContentTooLarge, EmptyPath, InvalidPath, InvalidProjectId
from domain.ingestion import normalise_path
from domain.urn import Urn

pytestmark = pytest.mark.unit


def test_first_ingest_records_registered_ingested_chunked_and_lineage(memory_app):
    result = memory_app.ingest_file(IngestFile(path="models/a.sql", content="select 1 from t"))

    assert result.accepted and result.changed
    events = memory_app.read(0, 10)
    assert [e.event_type for e in events] == [
        "Registered",
        "FileIngested",
        "FileChunked",
        "LineageExtracted",
    ]
    assert result.position == events[-1].position == 4
    assert events[2].subject == "events.source_file.FileChunked"
    assert events[2].payload["chunks"][0]["text"] == "select 1 from t"
    edges = events[3].payload["edges"]
    assert [(e["rel"], e["target"]) for e in edges] == [("READS_FROM", "urn:li:dataset:default:t")]


def test_unchanged_content_records_nothing(memory_app: UpstreamApplication):
    command = IngestFile(path="a.sql", content="select 1")
    memory_app.ingest_file(command)
    before = memory_app.max_position()

    again = memory_app.ingest_file(command)

    assert again.accepted and not again.changed
    assert memory_app.max_position() == before
    assert again.position == before


def test_changed_content_records_a_new_version(memory_app: UpstreamApplication):
    memory_app.ingest_file(IngestFile(path="a.sql", content="select 1"))
    result = memory_app.ingest_file(IngestFile(path="a.sql", content="select 2"))

    assert result.changed
    assert [e.event_type for e in memory_app.read(4, 10)] == ["FileIngested", "FileChunked"]


def test_same_path_in_two_projects_or_tenants_are_two_files(memory_app: UpstreamApplication):
    a = memory_app.ingest_file(IngestFile(path="a.sql", content="x", project_id="p1"))
    b = memory_app.ingest_file(IngestFile(path="a.sql", content="x", project_id="p2"))
    c = memory_app.ingest_file(
        IngestFile(path="a.sql", content="x", project_id="p1", tenant_id="t")
    )

    assert len({a.aggregate_id, b.aggregate_id, c.aggregate_id}) == 3


@pytest.mark.parametrize(
    ("path", "error"),
    [("", EmptyPath), ("   ", EmptyPath), ("./", EmptyPath), ("../etc/passwd", InvalidPath)],
)
def test_bad_paths_are_refused_and_record_nothing(memory_app, path, error):
    with pytest.raises(error):
        memory_app.ingest_file(IngestFile(path=path, content="select 1"))
    assert memory_app.max_position() == 0


def test_content_over_the_limit_is_refused_with_its_size():
    app = UpstreamApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}, max_file_bytes=10)
    with pytest.raises(ContentTooLarge) as raised:
        app.ingest_file(IngestFile(path="big.sql", content="x" * 11))
    assert "11 bytes" in raised.value.message and "10 bytes" in raised.value.message
    assert raised.value.to_dict()["hint"]
    assert app.max_position() == 0


def test_binary_content_is_refused(memory_app: UpstreamApplication):
    with pytest.raises(BinaryContent):
        memory_app.ingest_file(IngestFile(path="a.bin", content="ab\x00cd"))


def test_invalid_project_id_is_refused(memory_app: UpstreamApplication):
    with pytest.raises(InvalidProjectId):
        memory_app.ingest_file(IngestFile(path="a.sql", content="x", project_id="a b:c"))


def test_paths_are_normalised_to_repository_relative_posix():
    assert normalise_path("./models\\x.sql") == "models/x.sql"
    assert normalise_path("/abs/x.sql") == "abs/x.sql"


def test_urns_round_trip():
    urn = Urn.for_chunk("proj", "models/a:b.sql", 3)
    assert str(urn) == "urn:li:chunk:proj:models/a:b.sql#3"
    assert Urn.parse(str(urn)) == urn
    with pytest.raises(ValueError):
        Urn.parse("urn:x:y")
