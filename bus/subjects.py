"""Subjects, streams and consumer names: the bus's public interface (see `upstream asyncapi`)."""

from __future__ import annotations

EVENTS_STREAM = "EVENTS"
EVENTS_SUBJECTS = "events.>"
RELAY_BUCKET = "upstream_relay"
COMMAND_QUEUE = "upstream-commands"

CMD_INGEST_FILE = "cmd.ingest_file"


def consumer_name(projection: str) -> str:
    return f"projection-{projection}"
