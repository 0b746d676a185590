"""Subjects, streams and consumer names: the bus's public interface (see `upstream asyncapi`)."""

from __future__ import annotations

EVENTS_STREAM = "EVENTS"
EVENTS_SUBJECTS = "events.>"
RELAY_BUCKET = "upstream_relay"
COMMAND_QUEUE = "upstream-commands"

CMD_INGEST_FILE = "cmd.ingest_file"
CMD_DELETE_FILE = "cmd.delete_file"
CMD_RECORD_SNAPSHOT = "cmd.record_repository_snapshot"


def consumer_name(projection: str) -> str:
    return f"projection-{projection}"
