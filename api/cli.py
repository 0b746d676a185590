"""The `upstream` command line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.settings import Settings
from api.cli_kg import kg_after, kg_before, kg_cli
from domain.errors import UpstreamError
from domain.rerank import format_model_table, help_examples

cli = typer.Typer(
    name="upstream",
    help="Answers questions about data lineage and code, grounded in ingested repositories.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

ApiUrl = Annotated[
    str | None,
    typer.Option("--api-url", help="Service URL (default http://127.0.0.1:$UPSTREAM_PORT)"),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print raw JSON")]
Project = Annotated[str, typer.Option("--project", "-p", help="Project id")]
Tenant = Annotated[str, typer.Option("--tenant", help="Tenant id")]


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "faststream", "nats", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _client(api_url: str | None) -> Any:
    from api.client import UpstreamClient

    return UpstreamClient(api_url or Settings().api_url)


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


# -- serving -------------------------------------------------------------------------------
def _list_reranker_models(value: bool) -> None:
    if value:
        typer.echo(format_model_table())
        raise typer.Exit()


CrossEncoderName = Annotated[
    str | None, typer.Option("--cross-encoder", metavar="NAME", help=help_examples())
]
CrossEncoderPath = Annotated[
    str | None,
    typer.Option(
        "--cross-encoder-path",
        metavar="PATH",
        help="A cross-encoder folder on disk, no download (wins over --cross-encoder and the "
        "CROSS_ENCODER_PATH / CROSS_ENCODER_MODEL variables)",
    ),
]
ListRerankerModels = Annotated[
    bool,
    typer.Option(
        "--list-reranker-models",
        is_eager=True,
        callback=_list_reranker_models,
        help="Print the recommended cross-encoder models and exit",
    ),
]


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address")] = None,
    port: Annotated[int | None, typer.Option(help="Port")] = None,
    cross_encoder: CrossEncoderName = None,
    cross_encoder_path: CrossEncoderPath = None,
    list_reranker_models: ListRerankerModels = False,
) -> None:
    """Run everything in one process on the embedded profile (or the configured servers)."""
    _run_http("serve", host, port, cross_encoder_path, cross_encoder)


@cli.command()
def api(
    host: Annotated[str | None, typer.Option(help="Bind address")] = None,
    port: Annotated[int | None, typer.Option(help="Port")] = None,
    cross_encoder: CrossEncoderName = None,
    cross_encoder_path: CrossEncoderPath = None,
    list_reranker_models: ListRerankerModels = False,
) -> None:
    """Run an API replica (production profile: the workers apply commands and events)."""
    _run_http("api", host, port, cross_encoder_path, cross_encoder)


def with_cross_encoder_flags(
    settings: Settings, flag_path: str | None, flag_name: str | None
) -> Settings:
    """The flags win over the environment: given either, both CROSS_ENCODER_* are ignored
    (then the path wins over the name, as everywhere)."""
    if not (flag_path or flag_name):
        return settings
    return settings.model_copy(
        update={"cross_encoder_path": flag_path, "cross_encoder_model": flag_name}
    )


def _run_http(
    role: Any,
    host: str | None,
    port: int | None,
    cross_encoder_path: str | None = None,
    cross_encoder: str | None = None,
) -> None:
    import uvicorn

    from api.app import create_app

    settings = with_cross_encoder_flags(Settings(), cross_encoder_path, cross_encoder)
    configure_logging(settings.log_level)
    app = create_app(settings, role)
    uvicorn.run(
        app,
        host=host or settings.host,
        port=port or settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=10,
    )


@cli.command()
def worker() -> None:
    """Run a worker: command handlers, the relay and the projections (production profile)."""
    from adapters.bootstrap import bootstrap

    settings = Settings()
    configure_logging(settings.log_level)

    async def run() -> None:
        container = bootstrap(settings, "worker")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await container.start()
        try:
            await stop.wait()
        finally:
            await container.stop()

    asyncio.run(run())


# -- ingest and search ---------------------------------------------------------------------
def _batches(files: list[Any], max_files: int = 100, max_bytes: int = 4_000_000) -> list[list[Any]]:
    batches: list[list[Any]] = [[]]
    size = 0
    for f in files:
        length = len(f.content.encode())
        if batches[-1] and (len(batches[-1]) >= max_files or size + length > max_bytes):
            batches.append([])
            size = 0
        batches[-1].append(f)
        size += length
    return [b for b in batches if b]


@cli.command()
def ingest(
    targets: Annotated[
        list[str], typer.Argument(help="Files or folders, or one git repository URL")
    ],
    project: Project = "default",
    tenant: Tenant = "default",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Access tag (repeatable)")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Return once searchable")] = False,
    sync: Annotated[
        bool, typer.Option("--sync", help="Also retract files deleted from these folders")
    ] = False,
    ref: Annotated[str | None, typer.Option("--ref", help="Git ref, for a URL")] = None,
    kg_wait: Annotated[
        float, typer.Option("--kg-wait", help="Seconds to wait for KG enrichment to finish")
    ] = 0.0,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Ingest files and folders, or a git repository URL (text files only; binaries and
    vendored folders are skipped). With a kg_edge_creation model configured, the changed SQL and
    Python files are enriched with LLM-proposed edges in the background: the last line reports
    the runs (proposed, accepted, model, confidence)."""
    if len(targets) == 1 and _is_git_url(targets[0]):
        _ingest_git(targets[0], ref, project, tenant, tag or [], wait, api_url, as_json)
        return
    paths = [Path(t) for t in targets]
    from commands.sources.local import LocalFile, Skipped, project_files_first, walk

    settings = Settings()
    files: list[LocalFile] = []
    skipped: list[Skipped] = []
    for root in paths:
        if not root.exists():
            _fail(f"{root} does not exist")
        for item in walk(root, settings.max_file_bytes):
            if isinstance(item, LocalFile):
                files.append(item)
            else:
                skipped.append(item)
    files = project_files_first(files)
    client = _client(api_url)
    kg_state = kg_before(client, project, tenant)
    totals = {"files": len(files), "changed": 0, "unchanged": 0, "refused": 0, "position": 0}
    refused: list[dict[str, Any]] = []
    batches = _batches(files)
    for number, batch in enumerate(batches, start=1):
        body = {
            "project_id": project,
            "tenant_id": tenant,
            "tags": tag or [],
            "source": "cli",
            "files": [{"path": f.path, "content": f.content} for f in batch],
        }
        last = number == len(batches)
        _, reply = _call(client.post, "/api/v1/ingest", body, wait=str(wait and last).lower())
        _tally(totals, refused, reply)
        if not as_json:
            _progress(totals, len(files))
    deleted: list[str] = []
    if sync:
        deleted = _sync(client, paths, files, project, tenant, wait)
    kg_line, kg_summary = kg_after(client, project, tenant, kg_state, kg_wait)
    result = {
        **totals,
        "deleted": deleted,
        "skipped": [{"path": s.path, "reason": s.reason} for s in skipped],
        "refused_files": refused,
        "waited": wait,
        "kg": kg_summary,
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    for refusal in refused:
        typer.echo(f"refused {refusal['path']}: {refusal['error']['message']}", err=True)
    typer.echo(
        f"ingested {totals['files']} files into project {project}: {totals['changed']} changed, "
        f"{totals['unchanged']} unchanged, {totals['refused']} refused, {len(skipped)} skipped"
        + (f", {len(deleted)} deleted" if sync else "")
        + f" (position {totals['position']}{', searchable' if wait else ''})"
    )
    if kg_line:
        typer.echo(kg_line)


def _progress(totals: dict[str, int], total: int) -> None:
    """A bar on a terminal, a plain line per batch otherwise (logs, CI)."""
    done = totals["changed"] + totals["unchanged"] + totals["refused"]
    counts = (
        f"{done}/{total} files: {totals['changed']} changed, {totals['unchanged']} unchanged, "
        f"{totals['refused']} refused"
    )
    if sys.stderr.isatty():
        filled = int(30 * done / max(total, 1))
        end = "\n" if done >= total else ""
        typer.echo(f"\r[{'#' * filled}{'.' * (30 - filled)}] {counts}", err=True, nl=False)
        typer.echo(end, err=True, nl=False)
    else:
        typer.echo(counts, err=True)


def _is_git_url(text: str) -> bool:
    return text.startswith(("https://", "ssh://", "git://", "git@")) or text.endswith(".git")


def _ingest_git(
    url: str,
    ref: str | None,
    project: str,
    tenant: str,
    tags: list[str],
    wait: bool,
    api_url: str | None,
    as_json: bool,
) -> None:
    body = {"url": url, "ref": ref, "project_id": project, "tenant_id": tenant, "tags": tags}
    if not as_json:
        typer.echo(f"cloning {url}{'@' + ref if ref else ''} on the server...", err=True)
    client = _client(api_url)
    _, reply = _call(client.post, "/api/v1/github/ingest", body, wait=str(wait).lower())
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    typer.echo(
        f"ingested {reply['files']} files of {url} at {reply['commit'][:12]} into project "
        f"{project}: {reply['changed']} changed, {reply['unchanged']} unchanged, "
        f"{len(reply['refused'])} refused, {len(reply['skipped'])} skipped, "
        f"{len(reply['deleted'])} deleted (position {reply['position']})"
    )


def _sync(
    client: Any, roots: list[Path], files: list[Any], project: str, tenant: str, wait: bool
) -> list[str]:
    """A snapshot of the folders: files no longer there are retracted."""
    body = {
        "project_id": project,
        "tenant_id": tenant,
        "source": "local:" + ",".join(str(r.resolve()) for r in roots),
        "paths": [f.path for f in files],
    }
    _, reply = _call(client.post, "/api/v1/repositories/snapshot", body, wait=str(wait).lower())
    return list(reply["deleted"])


def _tally(totals: dict[str, int], refused: list[dict[str, Any]], reply: dict[str, Any]) -> None:
    totals["position"] = max(totals["position"], int(reply.get("position") or 0))
    for f in reply.get("files", []):
        if not f["accepted"]:
            totals["refused"] += 1
            refused.append(f)
        elif f["changed"]:
            totals["changed"] += 1
        else:
            totals["unchanged"] += 1


def _call(method: Any, *args: Any, **kwargs: Any) -> Any:
    from api.client import ApiError

    try:
        return method(*args, **kwargs)
    except (ApiError, UpstreamError) as error:
        if isinstance(error, ApiError):
            _fail(str(error))
        else:
            _fail(f"{error.message}\nhint: {error.detail_hint}")


@cli.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for")],
    project: Annotated[str | None, typer.Option("--project", "-p")] = None,
    tenant: Tenant = "default",
    top_k: Annotated[int, typer.Option("--top-k", "-k")] = 10,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Ranked chunks for a query (no LLM): URN, path, lines, score, snippet."""
    body = {"query": query, "project_id": project, "tenant_id": tenant, "top_k": top_k}
    _, reply = _call(_client(api_url).post, "/api/v1/search", body)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    if not reply["hits"]:
        typer.echo("no hits")
    for rank, hit in enumerate(reply["hits"], start=1):
        snippet = " ".join(hit["snippet"].split())[:100]
        typer.echo(
            f"{rank:>2}. {hit['score']:.3f}  {hit['path']}:{hit['line_start']}-"
            f"{hit['line_end']}  {hit['urn']}\n      {snippet}"
        )


INTENTS = ("deep", "graph", "semantic", "text", "title")


@cli.command()
def ask(
    question: Annotated[str, typer.Argument(help="A question about your data and code")],
    intent: Annotated[
        str, typer.Option("--intent", "-i", help="deep | graph | semantic | text | title")
    ] = "deep",
    project: Annotated[str | None, typer.Option("--project", "-p")] = None,
    tenant: Tenant = "default",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Your access tag")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k")] = None,
    model: Annotated[str | None, typer.Option("--model", help="A configured model")] = None,
    stream: Annotated[bool, typer.Option("--stream", help="Print the answer as it comes")] = False,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Ask a question; prints the answer and the evidence it rests on."""
    if intent not in INTENTS:
        _fail(f"unknown intent {intent!r}; use one of {', '.join(INTENTS)}", 2)
    body = {
        "query": question,
        "project_id": project,
        "tenant_id": tenant,
        "user_tags": tag or [],
        "top_k": top_k,
        "model": model,
    }
    if stream:
        reply = _ask_streaming(_client(api_url), f"/api/chat/{intent}/stream", body, as_json)
    else:
        _, reply = _call(_client(api_url).post, f"/api/chat/{intent}", body)
    if as_json:
        typer.echo(json.dumps(reply, indent=2, ensure_ascii=False))
        return
    typer.echo(render_answer(reply, printed_answer=stream))


def _ask_streaming(client: Any, path: str, body: dict[str, Any], quiet: bool) -> Any:
    final: dict[str, Any] | None = None

    def consume() -> None:
        nonlocal final
        for event, data in client.stream_events(path, body):
            if event == "token" and not quiet:
                typer.echo(data["text"], nl=False)
            elif event == "final":
                final = data
            elif event == "error":
                _fail(f"{data.get('message') or data.get('error')} (HTTP {data.get('status')})")

    _call(consume)
    if not quiet:
        typer.echo("")
    if final is None:
        _fail("the stream ended without an answer")
    return final


def render_answer(reply: dict[str, Any], printed_answer: bool = False) -> str:
    """The answer, then its evidence and warnings, for a person at a terminal."""
    meta = reply.get("metadata", {})
    lines = [] if printed_answer else [reply["answer"], ""]
    confidence = meta.get("confidence", {}).get("overall")
    lines.append(
        f"[{meta.get('action', '?')}] confidence {confidence} · model {reply.get('model')}"
        + (f" · cache {meta['cache']}" if meta.get("cache") else "")
    )
    if reply.get("evidence"):
        lines.append("evidence:")
        lines += [f"  - {e['type']:<5} {e['id']}" for e in reply["evidence"]]
    if reply.get("warnings"):
        lines.append("warnings:")
        lines += [f"  ! {w}" for w in reply["warnings"]]
    if reply.get("next_actions"):
        lines.append("next:")
        lines += [f"  > {a}" for a in reply["next_actions"]]
    route = meta.get("route_to")
    if route:
        lines.append(f"routed to {route.get('owner_email')} ({route.get('reason')})")
    return "\n".join(lines)


# -- operations ----------------------------------------------------------------------------
@cli.command()
def replay(
    projection: Annotated[str | None, typer.Argument(help="Projection (default: all)")] = None,
    api_url: ApiUrl = None,
) -> None:
    """Drop a read model and rebuild it from the event store (a running service or the data dir)."""
    client = _client(api_url)
    if client.reachable():
        _, reply = _call(client.post, "/api/v1/replay", {"projection": projection})
        typer.echo(
            f"replayed {reply['replayed']} up to position {reply['position']} (live service)"
        )
        return
    settings = Settings()
    configure_logging(settings.log_level)
    applied = asyncio.run(_offline_replay(settings, projection))
    typer.echo(f"replayed {applied} from {settings.data_dir} (service not running)")


async def _offline_replay(settings: Settings, projection: str | None) -> dict[str, int]:
    from adapters.bootstrap import bootstrap

    container = bootstrap(settings, "offline")
    await container.start()
    try:
        return await container.replay(projection)
    except UpstreamError as error:
        _fail(f"{error.message}\nhint: {error.detail_hint}")
        raise
    finally:
        await container.stop()


@cli.command()
def asyncapi() -> None:
    """Print the bus contract (cmd.* and events.* subjects, payload schemas) as AsyncAPI JSON."""
    from bus.asyncapi import asyncapi_json

    typer.echo(asyncapi_json())


@cli.command()
def health(api_url: ApiUrl = None) -> None:
    """Print the service's health report."""
    _, reply = _call(_client(api_url).get, "/health")
    typer.echo(json.dumps(reply, indent=2))


lineage_cli = typer.Typer(help="Lineage: extract from SQL (no server), or query the graph.")
cli.add_typer(lineage_cli, name="lineage")


@lineage_cli.command("extract")
def lineage_extract(
    file: Annotated[str, typer.Argument(help="SQL file, or - for standard input")] = "-",
    dialect: Annotated[str | None, typer.Option(help="SQL dialect (default: ansi)")] = None,
    jsonl: Annotated[
        str | None,
        typer.Option("--jsonl", help='File (or -) of {"sql":..., "dialect":...} lines'),
    ] = None,
) -> None:
    """Print {"sources", "targets", "columns"} for one SQL text; no server needed."""
    from domain.lineage import UnknownDialect
    from queries.lineage_extract import extract_jsonl, extract_one

    if jsonl is not None:
        stream = sys.stdin if jsonl == "-" else _open_or_fail(jsonl)
        for line in extract_jsonl(stream, dialect):
            typer.echo(line)
        return
    text = sys.stdin.read() if file == "-" else _open_or_fail(file).read()
    try:
        typer.echo(json.dumps(extract_one(text, dialect), indent=2))
    except UnknownDialect as error:
        _fail(str(error), 2)


def _lineage_walk(
    direction: str,
    name: str,
    project: str | None,
    tenant: str,
    hops: int,
    include_llm: bool | str,
    api_url: str | None,
    as_json: bool,
) -> None:
    mode = "proposed" if include_llm is True else include_llm or "accepted"
    params: dict[str, Any] = {"hops": hops, "tenant_id": tenant, "include_llm": mode}
    if project:
        params["project_id"] = project
    from urllib.parse import quote

    path = f"/api/v1/lineage/{quote(name, safe=':/')}/{direction}"
    _, reply = _call(_client(api_url).get, path, **params)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    start = reply["start"]
    typer.echo(f"{direction} of {start['name']} ({start['kind']}, {start['urn']}), {hops} hops:")
    if not reply["nodes"]:
        typer.echo("  nothing found")
    names = {n["urn"]: n["name"] for n in reply["nodes"]} | {start["urn"]: start["name"]}
    for node in reply["nodes"]:
        where = f"  {node['path']}" if node.get("path") else ""
        typer.echo(f"  {node['kind']:<16} {node['name']}{where}")
    typer.echo("edges:")
    for edge in reply["edges"]:
        source, target = (
            names.get(edge["source"], edge["source"]),
            names.get(edge["target"], edge["target"]),
        )
        lines = edge["evidence"]["lines"]
        typer.echo(
            f"  {source} -[{edge['rel']}]-> {target}   "
            f"{edge['evidence']['file']}:{lines[0]}-{lines[1]} ({edge['provenance']})"
        )


LineageName = Annotated[
    str, typer.Argument(help="A table, model, column or function name, or a URN")
]
Hops = Annotated[int, typer.Option("--hops", min=1, max=5, help="Steps to walk (1-5)")]
IncludeLlm = Annotated[
    bool, typer.Option("--include-llm", help="Follow every open LLM edge (= --llm-edges proposed)")
]
LlmEdges = Annotated[
    str,
    typer.Option("--llm-edges", help="LLM edges to follow: none, accepted (default) or proposed"),
]
ProjectOpt = Annotated[str | None, typer.Option("--project", "-p", help="Project id")]


@lineage_cli.command("upstream")
def lineage_upstream(
    name: LineageName,
    project: ProjectOpt = None,
    tenant: Tenant = "default",
    hops: Hops = 3,
    include_llm: IncludeLlm = False,
    llm_edges: LlmEdges = "accepted",
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """What feeds NAME: nodes (urn, name, kind, path) and edges with their evidence."""
    mode = True if include_llm else llm_edges
    _lineage_walk("upstream", name, project, tenant, hops, mode, api_url, as_json)


@lineage_cli.command("downstream")
def lineage_downstream(
    name: LineageName,
    project: ProjectOpt = None,
    tenant: Tenant = "default",
    hops: Hops = 3,
    include_llm: IncludeLlm = False,
    llm_edges: LlmEdges = "accepted",
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """What NAME feeds: what breaks if it changes."""
    mode = True if include_llm else llm_edges
    _lineage_walk("downstream", name, project, tenant, hops, mode, api_url, as_json)


def _open_or_fail(path: str) -> Any:
    try:
        return Path(path).open(encoding="utf-8")
    except OSError as error:
        _fail(f"cannot read {path}: {error.strerror}", 2)
        raise


tags_cli = typer.Typer(help="Tag owners: who low-confidence answers about a tag are routed to.")
cli.add_typer(tags_cli, name="tags")
TagArg = Annotated[str, typer.Argument(help="The access tag, as carried by the documents")]
TagActor = Annotated[str, typer.Option("--actor", help="Who makes the change (audit trail)")]
TagWait = Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for the read model")]


def _tag_path(tag: str, suffix: str) -> str:
    from urllib.parse import quote

    return f"/api/v1/tags/{quote(tag, safe='')}/{suffix}"


@tags_cli.command("assign")
def tags_assign(
    tag: TagArg,
    owner_id: Annotated[str, typer.Option("--owner-id", help="The owner's user id")],
    email: Annotated[str | None, typer.Option("--email", help="The owner's email")] = None,
    tenant: Tenant = "default",
    actor: TagActor = "cli",
    wait: TagWait = True,
    api_url: ApiUrl = None,
    as_json: JsonOut = False,
) -> None:
    """Make a user the owner of TAG."""
    body = {"owner_user_id": owner_id, "owner_email": email}
    params = {"tenant_id": tenant, "wait": str(wait).lower()}
    _, reply = _call(
        _client(api_url).request,
        "PUT",
        _tag_path(tag, "owner"),
        json=body,
        params=params,
        headers={"X-Actor": actor},
    )
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    verb = "assigned" if reply["changed"] else "unchanged (already the owner)"
    typer.echo(f"{reply['tag']}: {owner_id} <{email or 'no email'}> {verb}")


@tags_cli.command("remove")
def tags_remove(
    tag: TagArg,
    tenant: Tenant = "default",
    actor: TagActor = "cli",
    wait: TagWait = True,
    api_url: ApiUrl = None,
) -> None:
    """Remove TAG's owner (routing falls back to the admin)."""
    params = {"tenant_id": tenant, "wait": str(wait).lower()}
    _call(
        _client(api_url).request,
        "DELETE",
        _tag_path(tag, "owner"),
        params=params,
        headers={"X-Actor": actor},
    )
    typer.echo(f"{tag}: owner removed")


@tags_cli.command("list")
def tags_list(tenant: Tenant = "default", api_url: ApiUrl = None, as_json: JsonOut = False) -> None:
    """Every owned tag of the tenant, with its owner."""
    _, reply = _call(_client(api_url).get, "/api/v1/tags", tenant_id=tenant)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    if not reply["tags"]:
        typer.echo(f"no tag has an owner in tenant {tenant!r}")
    for row in reply["tags"]:
        email = row["owner_email"] or "no email"
        typer.echo(f"{row['tag']}\t{row['owner_user_id']} <{email}>\tby {row['assigned_by']}")


@tags_cli.command("history")
def tags_history(
    tag: TagArg, tenant: Tenant = "default", api_url: ApiUrl = None, as_json: JsonOut = False
) -> None:
    """TAG's assignments and removals: who, when."""
    _, reply = _call(_client(api_url).get, _tag_path(tag, "history"), tenant_id=tenant)
    if as_json:
        typer.echo(json.dumps(reply, indent=2))
        return
    for e in reply["events"]:
        typer.echo(f"{e['at']}\t{e['event_type']}\t{e['owner_user_id']}\tby {e['actor']}")


cli.add_typer(kg_cli, name="kg")

bench_cli = typer.Typer(help="Benchmarks and operational checks; reports go to docs/benchmarks/.")
cli.add_typer(bench_cli, name="bench")
ReportDir = Annotated[Path, typer.Option("--out", help="Report folder")]


@bench_cli.command("ingest")
def bench_ingest(
    files: Annotated[int, typer.Option(help="Files in the synthetic repository")] = 200,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """End-to-end ingest throughput next to raw SentenceTransformer.encode, in one run."""
    from dataclasses import asdict

    from bench.ingest import run_ingest_bench, write_report

    configure_logging("WARNING")
    result = run_ingest_bench(files)
    typer.echo(json.dumps(asdict(result), indent=2))
    typer.echo(f"report: {write_report(result, out)}")


@bench_cli.command("lineage")
def bench_lineage(
    corpus: Annotated[
        list[Path] | None, typer.Argument(help="JSONL files or folders of cases")
    ] = None,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """Statements per second of the SQL lineage extractor (and sqllineage's, if installed)."""
    from dataclasses import asdict

    from bench.lineage import DEFAULT_CORPUS, run_lineage_bench, write_report

    try:
        result = run_lineage_bench(corpus or [DEFAULT_CORPUS])
    except (ValueError, OSError) as error:
        _fail(str(error), 2)
    typer.echo(json.dumps(asdict(result), indent=2))
    typer.echo(f"report: {write_report(result, out)}")


@bench_cli.command("chat")
def bench_chat(
    sizes: Annotated[str, typer.Option(help="Chunk counts, comma-separated")] = "10000,50000",
    rounds: Annotated[int, typer.Option(help="Rounds of the 10 questions per endpoint")] = 3,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """Latency of each chat endpoint by stage (extractive provider) at 10k and 50k chunks."""
    from datetime import date

    from bench.chat import render_report, run_chat_bench

    configure_logging("WARNING")
    wanted = tuple(int(s) for s in sizes.split(",") if s.strip())
    result = run_chat_bench(wanted, rounds, progress=lambda line: typer.echo(line, err=True))
    out.mkdir(parents=True, exist_ok=True)
    day = date.today().isoformat()
    report = out / f"chat_{day}.md"
    report.write_text(render_report(result, day))
    typer.echo(report.read_text())
    typer.echo(f"report: {report}")


@bench_cli.command("gateway")
def bench_gateway(
    calls: Annotated[int, typer.Option(help="Calls through the gateway")] = 2000,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """The gateway's own overhead per call (median, p95) against a scripted local server."""
    from datetime import date

    from bench.gateway import run_gateway_bench

    configure_logging("WARNING")
    result = run_gateway_bench(calls)
    typer.echo(json.dumps(result, indent=2))
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"gateway_{date.today().isoformat()}.md"
    rows = "\n".join(f"| {k} | {v} |" for k, v in result.items())
    report.write_text(
        f"# Gateway overhead ({date.today().isoformat()})\n\n"
        "Time in the gateway per call minus the time inside the provider, measured in the same "
        "run against a scripted OpenAI-compatible server on 127.0.0.1 (replies with <think> and "
        "JSON to parse; the first model cooling, so the skip path runs too).\n\n"
        f"| measure | value |\n|---|---|\n{rows}\n\nReproduce: `upstream bench gateway`.\n"
    )
    typer.echo(f"report: {report}")


@bench_cli.command("cache")
def bench_cache(
    requests: Annotated[int, typer.Option(help="Repetitions of the cached question")] = 200,
    redis_url: Annotated[
        str | None, typer.Option(help="Redis for the caches (default: REDIS_URL, else in-process)")
    ] = None,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """A repeated question from the exact cache through HTTP (median < 5 ms), a paraphrase from
    the semantic cache, a negated question not."""
    from dataclasses import asdict

    from bench.cache import run_cache_bench, write_report

    configure_logging("WARNING")
    result = run_cache_bench(requests, redis_url or os.environ.get("REDIS_URL"))
    typer.echo(json.dumps(asdict(result), indent=2, default=str))
    typer.echo(f"report: {write_report(result, out)}")
    if not result.all_exact:
        raise typer.Exit(1)


@bench_cli.command("crash")
def bench_crash(
    files: Annotated[int, typer.Option(help="Files to ingest")] = 200,
    kill_after: Annotated[float, typer.Option(help="Fraction sent before SIGKILL")] = 0.4,
) -> None:
    """SIGKILL `upstream serve` mid-ingest, restart, re-ingest; check exactly-once and replay."""
    import tempfile
    from dataclasses import asdict

    from bench.crash import run_crash_check

    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        report = run_crash_check(Path(tmp), files, kill_after)
    typer.echo(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    if not report.ok:
        raise typer.Exit(1)


def _evaluation_commands() -> None:
    """`upstream bench embeddings` and `upstream eval` (the evaluation harness, bench/)."""
    from bench.commands import bench_embeddings, eval_command

    bench_cli.command("embeddings")(bench_embeddings)
    cli.command("eval")(eval_command)


_evaluation_commands()


@bench_cli.command("collections")
def bench_collections(
    documents: Annotated[int, typer.Option(help="Documents in the collection")] = 50_000,
    repeats: Annotated[int, typer.Option(help="Runs per read")] = 30,
    qdrant_url: Annotated[
        str | None, typer.Option("--qdrant-url", help="A Qdrant server (default: local mode)")
    ] = None,
    out: ReportDir = Path("docs/benchmarks"),
) -> None:
    """Filtered queries, documents pages, metadata-values (median, p95) and emptying time on
    one large collection."""
    from bench.collections import run_collections_bench, write_report

    configure_logging("WARNING")
    result = run_collections_bench(documents, repeats=repeats, qdrant_url=qdrant_url)
    typer.echo(json.dumps(result, indent=2))
    typer.echo(f"report: {write_report(result, out)}")


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cli()


if __name__ == "__main__":
    main()
