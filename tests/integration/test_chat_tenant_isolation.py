"""Tenant and access-tag isolation on every chat endpoint, as a property: whatever the tenant,
tags, intent and question, no evidence (id or note) comes from another tenant or from a chunk
tagged for someone else."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapters.bootstrap import bootstrap
from adapters.memory import HashingEmbedder
from adapters.settings import Settings
from api.app import create_app

pytestmark = pytest.mark.integration

TENANTS = ("acme", "globex")
TAGS = ("finance", "hr")
WORDS = (
    "orders",
    "customers",
    "revenue",
    "payroll",
    "upstream",
    "feeds",
    "what",
    "breaks",
    "table",
    "summary",
    "salary",
    "acme_orders",
    "globex_orders",
    "acme_revenue",
    "globex_revenue",
)


def _files(tenant: str) -> list[dict[str, object]]:
    """Each tenant: public SQL, a finance-tagged mart and an hr-tagged one; `customers` exists
    in both tenants (the same name, other rows)."""
    return [
        {
            "path": f"{tenant}/staging/{tenant}_orders.sql",
            "content": f"CREATE VIEW {tenant}_orders AS SELECT id, customer_id, amount "
            f"FROM raw_{tenant}.orders o JOIN customers c ON c.id = o.customer_id;",
        },
        {
            "path": f"{tenant}/staging/customers.sql",
            "content": f"CREATE TABLE customers AS SELECT id, name FROM raw_{tenant}.customers;",
        },
        {
            "path": f"{tenant}/finance/{tenant}_revenue.sql",
            "content": f"CREATE VIEW {tenant}_revenue AS SELECT customer_id, sum(amount) AS "
            f"revenue FROM {tenant}_orders GROUP BY customer_id;",
            "tags": ["finance"],
        },
        {
            "path": f"{tenant}/hr/{tenant}_payroll.sql",
            "content": f"CREATE VIEW {tenant}_payroll AS SELECT employee_id, salary "
            f"FROM raw_{tenant}.employees;",
            "tags": ["hr"],
        },
    ]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    data = tmp_path_factory.mktemp("isolation")
    config = Settings(UPSTREAM_DATA_DIR=data, UPSTREAM_SEED_PROFILE="local")  # type: ignore[call-arg]
    container = bootstrap(config, "serve", embedder=HashingEmbedder())
    with TestClient(create_app(container=container)) as client:
        for tenant in TENANTS:
            for file in _files(tenant):
                tags = file.pop("tags", [])
                body = {"project_id": "p", "tenant_id": tenant, "tags": tags, "files": [file]}
                reply = client.post("/api/v1/ingest?wait=true", json=body)
                assert reply.status_code == 200, reply.text
        yield client


def _forbidden(tenant: str, tags: set[str]) -> list[str]:
    """Markers that must never appear in this caller's evidence."""
    markers = [f"{other}/" for other in TENANTS if other != tenant]
    markers += [f"{o}_" for o in TENANTS if o != tenant]  # other tenants' object names
    markers += [f"{tenant}/{tag}/" for tag in TAGS if tag not in tags]
    return markers


@pytest.mark.spec("RAG-24", "RAG-25")
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    tenant=st.sampled_from((*TENANTS, "initech")),
    tags=st.sets(st.sampled_from(TAGS)),
    intent=st.sampled_from(("deep", "graph", "semantic", "text", "title")),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
)
# The riskiest cases always run: another tenant's or another tag's names asked for directly.
@example(tenant="acme", tags=set(), intent="semantic", words=["acme_revenue", "revenue"])
@example(tenant="acme", tags={"hr"}, intent="deep", words=["acme_revenue", "upstream"])
@example(tenant="acme", tags=set(), intent="graph", words=["acme_payroll", "salary"])
@example(tenant="globex", tags={"finance"}, intent="graph", words=["acme_orders", "feeds"])
@example(tenant="globex", tags=set(), intent="deep", words=["customers", "orders"])
@example(tenant="initech", tags={"finance", "hr"}, intent="deep", words=["orders", "customers"])
def test_no_endpoint_returns_evidence_of_another_tenant_or_tag(
    service, tenant, tags, intent, words
):
    question = " ".join(words) + "?"
    reply = service.post(
        f"/api/chat/{intent}",
        json={"query": question, "tenant_id": tenant, "user_tags": sorted(tags)},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    seen = " ".join(f"{e['id']} {e['note']}" for e in body["evidence"])
    seen += " " + " ".join(c.get("snippet_full", "") for c in body["metadata"]["citations"])
    for marker in _forbidden(tenant, tags):
        assert marker not in seen, (marker, body["evidence"])


def test_tenants_do_see_their_own_tagged_evidence(service):
    """The property above is not vacuous: with the tag, the tagged chunk is found."""
    reply = service.post(
        "/api/chat/semantic",
        json={"query": "acme_revenue revenue", "tenant_id": "acme", "user_tags": ["finance"]},
    )
    ids = [e["id"] for e in reply.json()["evidence"]]
    assert any("acme/finance/" in i for i in ids), ids
    reply = service.post(
        "/api/chat/semantic", json={"query": "acme_revenue revenue", "tenant_id": "acme"}
    )
    assert not any("acme/finance/" in e["id"] for e in reply.json()["evidence"])
