"""`upstream kg ...`: LLM-proposed lineage edges (propose, list, accept, reject, history, runs),
and the enrichment line `upstream ingest` prints."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

kg_cli = typer.Typer(help="Knowledge-graph enrichment: LLM-proposed lineage edges and review.")

ApiUrl = Annotated[
    str | None,
    typer.Option("--api-url", help="Service URL (default http://127.0.0.1:$UPSTREAM_PORT)"),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print raw JSON")]
Tenant = Annotated[str, typer.Option("--tenant", help="Tenant id")]
Actor = Annotated[str, typer.Option("--actor", help="Who decides (kept in the edge's history)")]
Reason = Annotated[str, typer.Option("--reason", help="Why (kept in the edge's history)")]
EdgeId = Annotated[str, typer.Argument(help="The edge id (`upstream kg list` shows them)")]


def _cli() -> Any:
    from api import cli  # the shared helpers (client, error handling); imported when used

    return cli


@kg_cli.command("propose")
def propose(
    scope: Annotated[
        list[str] | None, typer.Argument(help="File paths or folders (default: every file)")
    ] = None,
    project: Annotated[str, typer.Option("--project", "-p", help="Project id")] = "default",
    tenant: Tenant = "default",
    actor: Actor = "cli",
    reason: Reason = "",
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for the run to finish (0: don't)")
    ] = 0.0,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Ask the kg_edge_creation models for lineage edges of a project's SQL and Python files."""
    cli = _cli()
    client = cli._client(api_url)
    body = {"project_id": project, "tenant_id": tenant, "scope": scope or [], "reason": reason}
    _, reply = cli._call(
        client.request, "POST", "/api/v1/kg/propose", json=body, headers={"X-Actor": actor}
    )
    run = reply
    if wait > 0:
        run = _wait_for_run(client, reply["run_id"], tenant, wait)
    if as_json:
        typer.echo(json.dumps(run, indent=2))
        return
    if wait <= 0 or run.get("status") == "requested":
        typer.echo(
            f"enrichment run {reply['run_id']} requested with {', '.join(reply['models'])}"
            f" (follow it: upstream kg runs -p {project})"
        )
        return
    typer.echo(run_line(run))


def _wait_for_run(client: Any, run_id: str, tenant: str, seconds: float) -> dict[str, Any]:
    cli = _cli()
    deadline = time.monotonic() + seconds
    while True:
        _, run = cli._call(client.get, f"/api/v1/kg/runs/{run_id}", tenant_id=tenant)
        if run["status"] != "requested" or time.monotonic() > deadline:
            return dict(run)
        time.sleep(0.5)


@kg_cli.command("list")
def list_edges(
    project: Annotated[str | None, typer.Option("--project", "-p", help="Project id")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="proposed | accepted | rejected | retracted")
    ] = None,
    verification: Annotated[
        str | None, typer.Option("--verification", help="verified | contradicted | unverified")
    ] = None,
    tenant: Tenant = "default",
    limit: Annotated[int, typer.Option("--limit", help="At most this many")] = 100,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """LLM-proposed edges: status, verification, confidence, model, the edge and its file."""
    cli = _cli()
    params: dict[str, Any] = {"tenant_id": tenant, "limit": limit}
    for key, value in (("project_id", project), ("status", status), ("verification", verification)):
        if value is not None:
            params[key] = value
    _, reply = cli._call(cli._client(api_url).get, "/api/v1/kg/edges", **params)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    if not reply["edges"]:
        typer.echo("no LLM-proposed edges")
    for e in reply["edges"]:
        typer.echo(
            f"{e['edge_id']}  {e['status']:<9} {e['verification'] or '-':<12} "
            f"{e['confidence']:.2f}  {_short(e['source'])} -[{e['rel']}]-> {_short(e['target'])}"
            f"  {e['file_path']}:{e['line_start']}  ({e['model']})"
        )


@kg_cli.command("accept")
def accept(
    edge_id: EdgeId,
    tenant: Tenant = "default",
    actor: Actor = "cli",
    reason: Reason = "",
    api_url: ApiUrl = None,
) -> None:
    """Accept an LLM-proposed edge: lineage queries follow it by default from then on."""
    _decide("accept", edge_id, tenant, actor, reason, api_url)


@kg_cli.command("reject")
def reject(
    edge_id: EdgeId,
    tenant: Tenant = "default",
    actor: Actor = "cli",
    reason: Reason = "",
    api_url: ApiUrl = None,
) -> None:
    """Reject an LLM-proposed edge: it leaves the graph and is not proposed again."""
    _decide("reject", edge_id, tenant, actor, reason, api_url)


def _decide(
    decision: str, edge_id: str, tenant: str, actor: str, reason: str, api_url: str | None
) -> None:
    cli = _cli()
    client = cli._client(api_url)
    body = {"tenant_id": tenant, "reason": reason}
    _, reply = cli._call(
        client.request,
        "POST",
        f"/api/v1/kg/edges/{edge_id}/{decision}",
        json=body,
        params={"wait": "true"},
        headers={"X-Actor": actor},
    )
    done = "accepted" if decision == "accept" else "rejected"
    state = done if reply["changed"] else f"already {done}"
    typer.echo(f"edge {edge_id}: {state} by {actor} (position {reply['position']})")


@kg_cli.command("history")
def history(
    edge_id: EdgeId,
    tenant: Tenant = "default",
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Every event of an edge: parsed, proposed, verified, accepted, rejected, retracted."""
    cli = _cli()
    _, reply = cli._call(
        cli._client(api_url).get, f"/api/v1/kg/edges/{edge_id}/history", tenant_id=tenant
    )
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    edge = reply["edge"]
    typer.echo(
        f"{_short(edge['source'])} -[{edge['rel']}]-> {_short(edge['target'])}  "
        f"{edge['file_path']}  ({edge['provenance']}, now {edge['status']})"
    )
    for event in reply["events"]:
        details = event["details"]
        note = details.get("reason") or details.get("detail") or details.get("model") or ""
        typer.echo(
            f"  {event['occurred_at']}  {event['action']:<10} by {event['actor']:<14} {note}"
        )


@kg_cli.command("runs")
def runs(
    project: Annotated[str | None, typer.Option("--project", "-p", help="Project id")] = None,
    tenant: Tenant = "default",
    limit: Annotated[int, typer.Option("--limit", help="At most this many")] = 20,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Enrichment runs, newest first, with their counts, models and confidence summary."""
    cli = _cli()
    params: dict[str, Any] = {"tenant_id": tenant, "limit": limit}
    if project is not None:
        params["project_id"] = project
    _, reply = cli._call(cli._client(api_url).get, "/api/v1/kg/runs", **params)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    if not reply["runs"]:
        typer.echo("no enrichment runs")
    for run in reply["runs"]:
        typer.echo(run_line(run))


def run_line(run: dict[str, Any]) -> str:
    totals = run.get("totals")
    head = f"run {run['run_id']} ({run['trigger']}, {run['project_id']})"
    if not totals:
        return f"{head}: {run['status']}"
    return f"{head}: " + counts_text(
        totals["outcome"],
        totals["files"],
        totals["proposed"],
        totals["accepted"],
        totals["dropped"],
        totals["failed"],
        totals["models"],
        totals["confidence"],
    )


def counts_text(
    outcome: str,
    files: int,
    proposed: int,
    accepted: int,
    dropped: int,
    failed: int,
    models: list[str],
    confidence: dict[str, Any],
) -> str:
    if confidence.get("min") is None:
        summary = "none"
    else:
        summary = (
            f"min {confidence['min']:.2f} / median {confidence['median']:.2f} / "
            f"max {confidence['max']:.2f}"
        )
    return (
        f"{outcome}: {files} files, {proposed} proposed, {accepted} accepted, {dropped} dropped, "
        f"{failed} failed open, model {', '.join(models) or 'none'}, confidence {summary}"
    )


# -- `upstream ingest` ------------------------------------------------------------------------
def kg_before(client: Any, project: str, tenant: str) -> dict[str, Any] | None:
    """Where the event store is before an ingest, and whether enrichment is on (None: the
    service has no KG routes, or cannot answer)."""
    try:
        _, reply = client.get("/api/v1/kg/summary", project_id=project, tenant_id=tenant)
    except Exception:
        return None
    return dict(reply)


def kg_after(
    client: Any, project: str, tenant: str, before: dict[str, Any] | None, wait_s: float
) -> tuple[str | None, dict[str, Any] | None]:
    """The enrichment line for an ingest (None when enrichment is off), waiting up to `wait_s`
    seconds for its runs; and the summary itself (for --json)."""
    if before is None:
        return None, None
    params = {"project_id": project, "tenant_id": tenant, "after_position": before["head"]}
    deadline = time.monotonic() + wait_s
    while True:
        try:
            _, summary = client.get("/api/v1/kg/summary", **params)
        except Exception:
            return None, None
        busy = summary["pending_files"] or summary["running"]
        if not busy or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if not summary["enabled"]:
        return None, summary
    text = "kg enrichment: " + counts_text(
        "done" if not busy else "so far",
        summary["files"],
        summary["proposed"],
        summary["accepted"],
        summary["dropped"],
        summary["failed"],
        summary["models_used"],
        summary["confidence"],
    )
    if busy:
        text += f"; {summary['pending_files']} files still being enriched (upstream kg runs)"
    return text + f" (review: upstream kg list -p {project})", summary


def _short(urn: str) -> str:
    """`urn:li:dataset:shop:stg_orders` -> `stg_orders`."""
    return urn.split(":", 4)[-1] if urn.startswith("urn:li:") else urn
