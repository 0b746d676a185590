"""The write side: one eventsourcing Application whose notification log is the total order."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import IntegrityError, Notification

from commands.cache import CacheCommands
from commands.collections import CollectionCommands
from commands.kg import KGCommands
from commands.model_config import ModelConfigCommands
from commands.models import CommandResult, DeleteFile, IngestFile, RecordRepositorySnapshot
from commands.tags import TagCommands
from domain.chunkers import chunk_file
from domain.dbt import DbtProject
from domain.dbt_record import DbtProjectRecord, candidate_roots, dbt_root_of
from domain.envelope import EventEnvelope, snake_case
from domain.file_lineage import extract_file_lineage
from domain.ingestion import (
    DEFAULT_MAX_FILE_BYTES,
    FileToIngest,
    SourceFile,
    content_hash,
    ingest,
    normalise_path,
)
from domain.repository import Repository
from domain.urn import validate_project_id

log = logging.getLogger(__name__)

APP_NAME = "upstream"
_BASE_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


class UpstreamApplication(
    ModelConfigCommands,
    CollectionCommands,
    CacheCommands,
    TagCommands,
    KGCommands,
    Application[Any],
):
    """Command handlers: load aggregates, decide, save; the store assigns each event a position."""

    name = APP_NAME
    max_file_bytes = DEFAULT_MAX_FILE_BYTES

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        max_file_bytes: int | None = None,
        count_tokens: Callable[[str], int] | None = None,
        max_tokens: int = 256,
    ):
        # Aggregates are cached: looking up dbt project records per file must stay cheap.
        super().__init__(env={"AGGREGATE_CACHE_MAXSIZE": "10000", **(env or {})})
        self.count_tokens = count_tokens  # the embedding model's tokenizer, when there is one
        self.max_tokens = max_tokens
        if max_file_bytes is not None:
            self.max_file_bytes = max_file_bytes

    # -- commands ---------------------------------------------------------------------------
    def ingest_file(self, command: IngestFile) -> CommandResult:
        request = FileToIngest.validated(
            tenant_id=command.tenant_id,
            project_id=command.project_id,
            path=command.path,
            content=command.content,
            source=command.source,
            tags=command.tags,
            max_bytes=self.max_file_bytes,
            dialect=command.dialect,
        )
        aggregate_id = SourceFile.create_id(request.tenant_id, request.project_id, request.path)
        for attempt in range(3):
            try:
                return self._ingest_once(aggregate_id, request)
            except IntegrityError:  # another handler saved this file first: decide again
                log.info("concurrent write to %s, retrying (%d)", request.path, attempt + 1)
        return self._ingest_once(aggregate_id, request)

    def _ingest_once(self, aggregate_id: Any, request: FileToIngest) -> CommandResult:
        existing: SourceFile | None = self._get_or_none(aggregate_id)
        if existing is not None and existing.content_hash == content_hash(request.content):
            return CommandResult(
                accepted=True, aggregate_id=str(aggregate_id), position=self.max_position()
            )
        dbt_record = self._learn_dbt_project(request)
        lineage = extract_file_lineage(
            request.path,
            request.content,
            request.project_id,
            dialect=request.dialect,
            dbt=self._dbt_project_for(request, dbt_record),
        )
        chunks = chunk_file(
            request.path,
            request.content,
            max_tokens=self.max_tokens,
            count_tokens=self.count_tokens,
            dialect=request.dialect,
        )
        changed = ingest(existing, request, chunks, lineage)
        if changed is None:
            return CommandResult(
                accepted=True, aggregate_id=str(aggregate_id), position=self.max_position()
            )
        recordings = self.save(changed, dbt_record)
        return CommandResult(
            accepted=True,
            aggregate_id=str(aggregate_id),
            position=max(r.notification.id for r in recordings),
            changed=True,
        )

    def _learn_dbt_project(self, request: FileToIngest) -> DbtProjectRecord | None:
        """A `dbt_project.yml` creates or changes the project record (saved with the file)."""
        root = dbt_root_of(request.path)
        if root is None:
            return None
        record_id = DbtProjectRecord.create_id(request.tenant_id, request.project_id, root)
        record: DbtProjectRecord | None = self._get_or_none(record_id)
        if record is None:
            return DbtProjectRecord(request.tenant_id, request.project_id, root, request.content)
        record.change(request.content)
        return record

    def _dbt_project_for(
        self, request: FileToIngest, pending: DbtProjectRecord | None
    ) -> DbtProject | None:
        for root in candidate_roots(request.path):
            if pending is not None and pending.root == root:
                return pending.project()
            record_id = DbtProjectRecord.create_id(request.tenant_id, request.project_id, root)
            record: DbtProjectRecord | None = self._get_or_none(record_id)
            if record is not None:
                return record.project()
        return None

    def delete_file(self, command: DeleteFile) -> CommandResult:
        path = normalise_path(command.path)
        validate_project_id(command.project_id)
        aggregate_id = SourceFile.create_id(command.tenant_id, command.project_id, path)
        source_file = self._get_or_none(aggregate_id)
        if source_file is None or not source_file.present:
            return CommandResult(
                accepted=True, aggregate_id=str(aggregate_id), position=self.max_position()
            )
        source_file.remove(command.reason)
        return self._saved(aggregate_id, source_file)

    def record_repository_snapshot(self, command: RecordRepositorySnapshot) -> CommandResult:
        """Record the snapshot and delete, in the same transaction, the files no longer there."""
        validate_project_id(command.project_id)
        paths = sorted({normalise_path(p) for p in command.paths})
        aggregate_id = Repository.create_id(command.tenant_id, command.project_id, command.source)
        repository = self._get_or_none(aggregate_id) or Repository(
            command.tenant_id, command.project_id, command.source
        )
        removed = repository.removed_since_last(paths)
        deleted = [self._remove_file(command.tenant_id, command.project_id, p) for p in removed]
        repository.record_snapshot(
            ref=command.ref,
            commit=command.commit,
            paths=paths,
            changed=command.changed,
            deleted=removed,
        )
        recordings = self.save(repository, *[d for d in deleted if d is not None])
        return CommandResult(
            accepted=True,
            aggregate_id=str(aggregate_id),
            position=max(r.notification.id for r in recordings),
            changed=True,
            deleted=tuple(removed),
        )

    def _remove_file(self, tenant_id: str, project_id: str, path: str) -> SourceFile | None:
        source_file: SourceFile | None = self._get_or_none(
            SourceFile.create_id(tenant_id, project_id, path)
        )
        if source_file is None or not source_file.present:
            return None
        source_file.remove("no longer in the repository")
        return source_file

    def _saved(self, aggregate_id: Any, aggregate: Any) -> CommandResult:
        recordings = self.save(aggregate)
        position = max(r.notification.id for r in recordings)
        return CommandResult(
            accepted=True, aggregate_id=str(aggregate_id), position=position, changed=True
        )

    def _get_or_none(self, aggregate_id: Any) -> Any:
        if aggregate_id not in self.repository:
            return None
        return self.repository.get(aggregate_id)

    # -- the notification log, as envelopes -----------------------------------------------
    def max_position(self) -> int:
        return self.recorder.max_notification_id() or 0

    def read(self, after: int, limit: int) -> list[EventEnvelope]:
        notifications = self.recorder.select_notifications(
            start=after, limit=limit, inclusive_of_start=False
        )
        return [self.to_envelope(n) for n in notifications]

    def to_envelope(self, notification: Notification) -> EventEnvelope:
        domain_event = self.mapper.to_domain_event(notification)
        return envelope_for(domain_event, notification.id, self.name)


def envelope_for(domain_event: DomainEventProtocol[Any], position: int, app: str) -> EventEnvelope:
    event_class = type(domain_event)
    aggregate_name = event_class.__qualname__.split(".")[0]
    payload = {k: v for k, v in vars(domain_event).items() if k not in _BASE_FIELDS}
    return EventEnvelope(
        position=position,
        app=app,
        aggregate=snake_case(aggregate_name),
        aggregate_id=str(domain_event.originator_id),
        aggregate_version=int(domain_event.originator_version),
        event_type=event_class.__name__,
        timestamp=getattr(domain_event, "timestamp").isoformat(),  # noqa: B009
        payload=_jsonable(payload),
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
