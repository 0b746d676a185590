"""Command intake over FastStream's in-memory test broker."""

from __future__ import annotations

import pytest
from faststream.nats import NatsBroker, TestNatsBroker

from bus.command_bus import CommandBus
from bus.intake import register_command_handlers
from bus.subjects import CMD_INGEST_FILE
from commands.models import IngestFile
from domain.errors import BinaryContent, InvalidCommand

pytestmark = pytest.mark.unit


@pytest.fixture
def woken() -> list[int]:
    return []


@pytest.fixture
def broker(memory_app, woken) -> NatsBroker:
    broker = NatsBroker()
    register_command_handlers(broker, memory_app, lambda: woken.append(1))
    return broker


async def test_ingest_file_request_replies_with_the_position(broker, memory_app, woken):
    async with TestNatsBroker(broker) as test_broker:
        result = await CommandBus(test_broker).send(
            CMD_INGEST_FILE, IngestFile(path="a.sql", content="select 1")
        )
    assert result.accepted and result.changed
    assert result.position == memory_app.max_position()
    assert woken == [1]  # the relay is told there is something to publish


async def test_a_refused_command_comes_back_as_its_typed_error(broker, memory_app):
    async with TestNatsBroker(broker) as test_broker:
        with pytest.raises(BinaryContent):
            await CommandBus(test_broker).send(
                CMD_INGEST_FILE, IngestFile(path="a.bin", content="\x00")
            )
    assert memory_app.max_position() == 0


async def test_a_malformed_payload_gets_a_clear_error(broker):
    async with TestNatsBroker(broker) as test_broker:
        reply = await test_broker.request({"content": "x", "bogus": 1}, CMD_INGEST_FILE)
    body = reply.body if isinstance(reply.body, dict) else __import__("json").loads(reply.body)
    assert body["accepted"] is False
    assert body["error"]["code"] == InvalidCommand.code
    assert "path" in body["error"]["message"] and "bogus" in body["error"]["message"]
