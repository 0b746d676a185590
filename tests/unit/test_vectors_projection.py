"""The vectors projection on fakes: order, idempotence, replacement and rebuild."""

from __future__ import annotations

import pytest

from adapters.memory import HashingEmbedder, InMemoryVectorIndex
from commands.application import UpstreamApplication
from commands.models import IngestFile
from projections.rebuild import catch_up, rebuild
from projections.vectors import VectorsProjection
from queries.search import SearchService

pytestmark = pytest.mark.unit


@pytest.fixture
def projection(embedder: HashingEmbedder, memory_index: InMemoryVectorIndex) -> VectorsProjection:
    projection = VectorsProjection(embedder, memory_index)
    projection.start()
    return projection


def _ingest(app: UpstreamApplication, path: str, content: str, **kw) -> None:
    app.ingest_file(IngestFile(path=path, content=content, project_id="p", **kw))


def test_chunks_become_points_with_evidence_payload(memory_app, projection, memory_index):
    _ingest(memory_app, "models/a.sql", "select amount from orders", tags=("finance",))
    catch_up(projection, memory_app)

    (point,) = memory_index.dump()
    assert point.payload["urn"] == "urn:li:chunk:p:models/a.sql#0"
    assert point.payload["file_urn"] == "urn:li:file:p:models/a.sql"
    assert point.payload["path"] == "models/a.sql"
    assert (point.payload["line_start"], point.payload["line_end"]) == (1, 1)
    assert point.payload["chunk_type"] == "sql_statement"
    assert point.payload["tables"] == ["orders"]
    assert point.payload["tenant_id"] == "default" and point.payload["tags"] == ["finance"]
    assert projection.position() == memory_app.max_position()


def test_already_applied_positions_are_skipped(memory_app, projection, embedder):
    _ingest(memory_app, "a.sql", "select 1")
    events = memory_app.read(0, 10)
    projection.process(events)
    calls = embedder.texts_embedded

    projection.process(events)  # a duplicate delivery

    assert embedder.texts_embedded == calls


def test_a_new_version_replaces_the_old_chunks(memory_app, projection, memory_index):
    _ingest(memory_app, "a.md", "\n".join(f"line {i}" for i in range(100)))
    catch_up(projection, memory_app)
    assert memory_index.count() > 1

    _ingest(memory_app, "a.md", "one line now")
    catch_up(projection, memory_app)

    assert [p.payload["text"] for p in memory_index.dump()] == ["one line now"]


def test_rebuild_gives_the_same_read_model(memory_app, projection, memory_index):
    for i in range(20):
        _ingest(memory_app, f"f{i}.sql", f"select c{i} from t{i}\n" * (i + 1))
    _ingest(memory_app, "f3.sql", "changed")
    catch_up(projection, memory_app, batch=7)
    live = memory_index.dump()

    rebuild(projection, memory_app, batch=50)

    assert memory_index.dump() == live


def test_embedding_keeps_input_order_even_when_sorted_by_length(memory_app, projection):
    _ingest(memory_app, "long.sql", "alpha " * 50)
    _ingest(memory_app, "short.sql", "beta")
    catch_up(projection, memory_app)
    search = SearchService(projection.embedder, projection.index)

    assert search.search("beta", project_id="p")[0].path == "short.sql"
    assert search.search("alpha alpha", project_id="p")[0].path == "long.sql"


def test_search_never_returns_another_tenants_chunks(memory_app, projection):
    _ingest(memory_app, "a.sql", "secret revenue table", tenant_id="acme")
    _ingest(memory_app, "b.sql", "secret revenue table", tenant_id="globex")
    catch_up(projection, memory_app)
    search = SearchService(projection.embedder, projection.index)

    hits = search.search("secret revenue", tenant_id="acme", top_k=10)

    assert [h.path for h in hits] == ["a.sql"]


def test_a_one_statement_edit_re_embeds_only_that_chunk(memory_app, projection, embedder):
    statements = [f"create view v{i} as select c{i} from t{i};" for i in range(3)]
    _ingest(memory_app, "views.sql", "\n\n".join(statements))
    catch_up(projection, memory_app)
    before = embedder.texts_embedded

    statements[1] = "create view v1 as select other_column from t1;"
    _ingest(memory_app, "views.sql", "\n\n".join(statements))
    catch_up(projection, memory_app)

    assert embedder.texts_embedded - before == 1
    assert projection.reused_vectors == 2


class FlakyEmbedder(HashingEmbedder):
    """Fails on any batch holding a poisoned text, and on that text alone."""

    def embed(self, texts):
        if any("POISON" in t for t in texts):
            raise RuntimeError("model rejected the input")
        return super().embed(texts)


@pytest.mark.spec("LLM-41.1")
def test_a_chunk_that_cannot_be_embedded_does_not_block_the_rest(memory_app, memory_index):
    embedder = FlakyEmbedder()
    projection = VectorsProjection(embedder, memory_index)
    projection.start()
    statements = ["create view a as select x from t;", "create view b as select POISON from t;"]
    _ingest(memory_app, "v.sql", "\n\n".join(statements))
    _ingest(memory_app, "w.sql", "create view c as select y from u;")

    catch_up(projection, memory_app)

    assert sorted(p.payload["name"] for p in memory_index.dump()) == ["a", "c"]
    assert projection.failed_chunks == 1
    assert projection.position() == memory_app.max_position()  # nothing is stuck behind it
    assert embedder.model_name == memory_index.model[1]  # every call names the model in use


def test_irrelevant_events_move_the_position_and_flush_writes_it(memory_app, projection):
    _ingest(memory_app, "a.sql", "select 1 from t")
    catch_up(projection, memory_app)
    saved = projection.index.checkpoint("vectors")
    from commands.models import RecordRepositorySnapshot

    memory_app.record_repository_snapshot(
        RecordRepositorySnapshot(project_id="p", source="s", paths=("a.sql",))
    )
    catch_up(projection, memory_app)  # only repository events: nothing for this read model
    assert projection.position() == memory_app.max_position()

    projection.flush()
    assert projection.index.checkpoint("vectors") == memory_app.max_position() > saved
