"""Ollama health: connectivity, required models, memory, quantization and the safe context window.

llm-service.md "Ollama Integration" and "Error Handling and Resilience"; hybrid-inference.md
(merged into llm-service.md) "Ollama Memory Monitoring and Adaptive Context Management".

`OllamaHealthMonitor.check()` asks Ollama two things:

- `GET /api/tags`: the installed models. Not answering (connection refused, timeout, HTTP error,
  a body that is not a model list) makes the status `unavailable`.
- `GET /api/ps`: the models loaded in memory, with `size` (bytes the loaded model takes) and
  `size_vram` (the part of it in GPU memory).

Memory. Ollama's API reports what its loaded models take, never how much memory is free. The
`memory_available_mb` estimate is therefore, in this order (`memory_source` says which):

1. `configured_budget`: `OllamaHealthConfig.memory_budget_mb` (the memory given to Ollama, e.g.
   `OLLAMA_MEMORY_MB`) minus the `size` of every model `/api/ps` lists;
2. `host_meminfo`: when Ollama's base URL is a loopback address, the host's `MemAvailable`
   (`/proc/meminfo`; loaded models are already out of it);
3. `unknown`: `null` (Ollama on another host and no budget configured); memory does not then
   degrade the status.

Status:

- `unavailable`: `/api/tags` failed;
- `degraded`: reachable, but a required model is missing, `/api/ps` failed, or the memory
  estimate is under `min_memory_mb`;
- `healthy`: otherwise.

`provider_health(provider)` is the gateway's hook: `ollama` is healthy only when the last check
said `healthy` (before any check it is assumed healthy: a failed call falls back anyway); every
other provider is healthy.

Quantization (`use_quantized`, `OLLAMA_USE_QUANTIZED`): each required chat model `repo:tag` is
replaced by its `repo:tag-<quantization>` variant (`llama3.1:8b` -> `llama3.1:8b-q4_0`); any
installed `repo:tag...-<quantization>` tag satisfies it (`llama3.1:8b-instruct-q4_0`). Names
already carrying a quantization (`-q4_K_M`, `-q8_0`, `-fp16`) are kept, and embedding models
(`embed` in the name: nomic-embed-text is published unquantized) are checked as named.

Safe context window (spec: "memory_available * 0.6"): 60 % of the available memory may hold the
KV cache; a token of llama3.1:8b's KV cache takes 0.125 MB in fp16 (2 x 32 layers x 8 KV heads x
128 dims x 2 bytes), so `window = memory_available_mb * 0.6 / kv_mb_per_token`, rounded down to
256 tokens and clamped to [`min_context_window`, `max_context_window`]. Without a memory
estimate it is `max_context_window`. When the monitor was given an Ollama provider with a
`num_ctx` attribute and memory is known, the window is applied to it (`num_ctx` of every later
request) after each check; a change is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx

from domain.llm import ChainEntry

log = logging.getLogger(__name__)

HEALTHY, DEGRADED, UNAVAILABLE = "healthy", "degraded", "unavailable"
LOCAL_PROVIDERS: frozenset[str] = frozenset({"ollama"})
# Usage types whose chain cannot fall back to another provider's model (another vector space).
NO_FALLBACK_USAGE_TYPES: frozenset[str] = frozenset({"embedding"})
DEFAULT_REQUIRED_MODELS: tuple[str, ...] = ("llama3.1:8b", "nomic-embed-text")
TROUBLESHOOTING: tuple[str, ...] = (
    "Start Ollama with `ollama serve` (install it from https://ollama.com).",
    "Check OLLAMA_BASE_URL points at it (from a container: http://host.docker.internal:11434).",
    "Check it answers: `curl $OLLAMA_BASE_URL/api/tags`.",
    "Until then local models are skipped and the chains' cloud/extractive entries answer.",
)
_MB = 1024 * 1024
_QUANTIZED_TAG = re.compile(r"(^|-)(q\d\w*|fp16|f16|fp32|f32)$", re.IGNORECASE)


@dataclass(frozen=True)
class OllamaHealthConfig:
    """The monitor's settings (environment names in brackets, read by adapters/settings.py)."""

    interval_s: float = 30.0  # [OLLAMA_HEALTH_INTERVAL] background refresh period
    timeout_s: float = 5.0  # [OLLAMA_HEALTH_TIMEOUT] per call to /api/tags and /api/ps
    use_quantized: bool = False  # [OLLAMA_USE_QUANTIZED]
    quantization: str = "q4_0"  # [OLLAMA_QUANTIZATION] the variant suffix
    memory_budget_mb: float | None = None  # [OLLAMA_MEMORY_MB] memory given to Ollama
    min_memory_mb: float = 1024.0  # [OLLAMA_MIN_MEMORY_MB] below: degraded
    max_context_window: int = 8192  # [OLLAMA_CONTEXT_WINDOW] the ceiling
    min_context_window: int = 2048  # [OLLAMA_MIN_CONTEXT_WINDOW] the floor
    kv_mb_per_token: float = 0.125  # [OLLAMA_KV_MB_PER_TOKEN] llama3.1:8b, fp16 KV cache
    memory_fraction: float = 0.6  # the spec's "memory_available * 0.6"
    # [INFERENCE_FALLBACK_PROVIDER] groq|openrouter, set only when its API key is set too
    fallback_provider: str | None = None
    fallback_model: str | None = None  # [INFERENCE_FALLBACK_MODEL]


@runtime_checkable
class OllamaModelLister(Protocol):
    """What the monitor needs of an Ollama client (adapters.llm.ollama.OllamaProvider)."""

    async def list_models(self) -> list[dict[str, Any]]: ...

    async def running_models(self) -> list[dict[str, Any]]: ...


class _HttpOllama:
    """A minimal client of `/api/tags` and `/api/ps` when only a base URL is given."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._client: httpx.AsyncClient | None = None

    async def list_models(self) -> list[dict[str, Any]]:
        return await self._models("/api/tags")

    async def running_models(self) -> list[dict[str, Any]]:
        return await self._models("/api/ps")

    async def _models(self, path: str) -> list[dict[str, Any]]:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=30.0)
        response = await self._client.get(path, headers={"Accept": "application/json"})
        if response.status_code != 200:
            raise _CheckFailed(f"{path} answered HTTP {response.status_code}")
        try:
            models = response.json().get("models")
        except (ValueError, AttributeError):
            raise _CheckFailed(f"{path} answered malformed JSON") from None
        if not isinstance(models, list):
            raise _CheckFailed(f"{path} answered without a 'models' list")
        return [m for m in models if isinstance(m, dict)]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class _CheckFailed(Exception):
    """A failed call, described without secrets."""


@dataclass(frozen=True)
class RequiredModel:
    """A model the service needs: the configured name and the name actually required."""

    configured: str
    required: str
    quantized: bool

    @property
    def pull_command(self) -> str:
        return f"ollama pull {self.required}"


def _split(name: str) -> tuple[str, str]:
    repo, _, tag = name.strip().partition(":")
    return repo, tag or "latest"


def _is_embedding(name: str) -> bool:
    return "embed" in _split(name)[0].lower()


def required_variant(name: str, config: OllamaHealthConfig) -> RequiredModel:
    """The name to require for `name`: its quantized variant when configured (see module doc)."""
    repo, tag = _split(name)
    if not config.use_quantized or _is_embedding(name) or _QUANTIZED_TAG.search(tag):
        return RequiredModel(name, name, quantized=bool(_QUANTIZED_TAG.search(tag)))
    quant = config.quantization
    variant = f"{repo}:{quant}" if tag == "latest" else f"{repo}:{tag}-{quant}"
    return RequiredModel(name, variant, quantized=True)


def _installed(model: RequiredModel, installed: Sequence[str], config: OllamaHealthConfig) -> str:
    """The installed name satisfying `model` ("" when none does)."""
    repo, tag = _split(model.required)
    for name in installed:
        other_repo, other_tag = _split(name)
        if other_repo != repo:
            continue
        if other_tag == tag:
            return name
        if model.quantized and model.required != model.configured:
            base = _split(model.configured)[1]
            quant = config.quantization.lower()
            prefix_ok = base == "latest" or other_tag.lower().startswith(base.lower())
            if prefix_ok and other_tag.lower().endswith(quant):
                return name
    return ""


def _model_name(model: Mapping[str, Any]) -> str:
    return str(model.get("name") or model.get("model") or "")


def _mb(value: Any) -> float:
    return round(float(value) / _MB, 1) if isinstance(value, int | float) else 0.0


def _is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_memory_available_mb() -> float | None:
    """`MemAvailable` of /proc/meminfo in MB (None where there is no /proc)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def fallback_by_usage_type(
    chains: Mapping[str, Sequence[ChainEntry]], inference_fallback: bool = False
) -> dict[str, bool]:
    """For each usage type whose chain holds an Ollama entry: does it hold a non-Ollama one
    (or is the INFERENCE_FALLBACK_PROVIDER, which the gateway appends, usable)?

    The embedding chain is left out: its vectors cannot come from another provider's model.
    """
    result: dict[str, bool] = {}
    for usage, chain in chains.items():
        enabled = [e for e in chain if e.enabled]
        if usage in NO_FALLBACK_USAGE_TYPES or not any(
            e.provider in LOCAL_PROVIDERS for e in enabled
        ):
            continue
        result[usage] = inference_fallback or any(
            e.provider not in LOCAL_PROVIDERS for e in enabled
        )
    return result


def fallback_configured(
    chains: Mapping[str, Sequence[ChainEntry]], inference_fallback: bool = False
) -> bool:
    """Every chain that uses Ollama can fall back past it; with no chain using Ollama, true
    when any non-Ollama entry (or the inference fallback) is configured at all."""
    per_usage = fallback_by_usage_type(chains, inference_fallback)
    if per_usage:
        return all(per_usage.values())
    return inference_fallback or any(
        e.enabled and e.provider not in LOCAL_PROVIDERS
        for usage, chain in chains.items()
        if usage not in NO_FALLBACK_USAGE_TYPES
        for e in chain
    )


ChainsSource = Callable[[], Mapping[str, Sequence[ChainEntry]]]


@dataclass
class _State:
    report: dict[str, Any] | None = None
    context_window: int | None = None
    checks: int = 0
    history: list[str] = field(default_factory=list)


class OllamaHealthMonitor:
    """Checks Ollama now (`check`) and every `interval_s` in the background (`start`/`stop`)."""

    def __init__(
        self,
        ollama: OllamaModelLister | str,
        required_models: Sequence[str] = DEFAULT_REQUIRED_MODELS,
        settings: OllamaHealthConfig | None = None,
        clock: Callable[[], float] = time.time,
        *,
        chains: ChainsSource | None = None,
        memory_probe: Callable[[], float | None] | None = None,
    ) -> None:
        self.config = settings or OllamaHealthConfig()
        self._owned: _HttpOllama | None = None
        self._client: OllamaModelLister
        if isinstance(ollama, str):
            self._owned = _HttpOllama(ollama)
            self._client = self._owned
            self.base_url = ollama.rstrip("/")
        else:
            self._client = ollama
            self.base_url = str(getattr(ollama, "base_url", "")).rstrip("/")
        self.required = [required_variant(m, self.config) for m in required_models]
        self._clock = clock
        self._chains = chains
        if memory_probe is None and _is_loopback(self.base_url):
            memory_probe = host_memory_available_mb
        self._memory_probe = memory_probe
        self._state = _State()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # -- reading ------------------------------------------------------------------------
    @property
    def report(self) -> dict[str, Any] | None:
        """The last check's report (None before the first)."""
        return self._state.report

    @property
    def status(self) -> str | None:
        report = self._state.report
        return str(report["status"]) if report else None

    @property
    def checks(self) -> int:
        return self._state.checks

    def provider_health(self, provider: str) -> bool:
        """The gateway's hook: False for `ollama` while the last check was not healthy."""
        if provider not in LOCAL_PROVIDERS:
            return True
        status = self.status
        return status is None or status == HEALTHY

    def context_window(self) -> int:
        """The safe `num_ctx` for the next request (see module doc)."""
        window = self._state.context_window
        return window if window is not None else self.config.max_context_window

    def resolve_model(self, model_id: str) -> str:
        """The installed name to call for a configured Ollama model: its quantized variant
        when `use_quantized` found one (`llama3.1:8b` -> `llama3.1:8b-instruct-q4_0`)."""
        report = self._state.report
        variants = (report or {}).get("quantized_models") or {}
        found = variants.get(model_id)
        if found:
            return str(found)
        for model in self.required:
            if model.configured == model_id:
                return model.required
        return model_id

    def model_for(self, entry: ChainEntry) -> str:
        """The gateway's model resolver: an Ollama entry's installed (quantized) variant."""
        return self.resolve_model(entry.model_id) if entry.provider == "ollama" else entry.model_id

    def safe_context_window(self, memory_available_mb: float | None) -> int:
        cfg = self.config
        if memory_available_mb is None:
            return cfg.max_context_window
        budget_mb = max(0.0, memory_available_mb) * cfg.memory_fraction
        tokens = int(budget_mb / cfg.kv_mb_per_token) // 256 * 256
        return max(cfg.min_context_window, min(cfg.max_context_window, tokens))

    async def snapshot(self) -> dict[str, Any]:
        """The last report, checking first when there is none yet."""
        report = self._state.report
        return report if report is not None else await self.check()

    # -- checking -----------------------------------------------------------------------
    async def check(self) -> dict[str, Any]:
        """Ask Ollama now; store and return the report."""
        async with self._lock:
            report = await self._check()
            self._remember(report)
            return report

    async def _check(self) -> dict[str, Any]:
        cfg = self.config
        started = time.perf_counter()
        reasons: list[str] = []
        fallback = await self._fallback()
        report: dict[str, Any] = {
            "status": UNAVAILABLE,
            "base_url": self.base_url,
            "checked_at": datetime.fromtimestamp(self._clock(), UTC).isoformat(),
            "latency_ms": 0.0,
            "memory_available_mb": None,
            "memory_source": "unknown",
            "memory_used_by_models_mb": 0.0,
            "models_loaded": [],
            "models_available": [],
            "required_models": [m.required for m in self.required],
            "missing_models": [],
            "pull_commands": [],
            "quantized": cfg.use_quantized,
            "quantization": cfg.quantization if cfg.use_quantized else None,
            "fallback_configured": fallback[0],
            "fallback_by_usage_type": fallback[1],
            "fallback_provider": cfg.fallback_provider,
            "fallback_model": cfg.fallback_model,
            "context_window": self.context_window(),
            "reasons": reasons,
            "error": None,
            "troubleshooting": [],
            "refresh_interval_s": cfg.interval_s,
        }
        try:
            installed = await self._call(self._client.list_models, "/api/tags")
        except _CheckFailed as failure:
            report["error"] = f"Ollama at {self.base_url} is not reachable: {failure}"
            report["troubleshooting"] = list(TROUBLESHOOTING)
            reasons.append("ollama not reachable")
            report["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
            return report
        names = [_model_name(m) for m in installed]
        report["models_available"] = names
        sizes = {_model_name(m): m.get("size") for m in installed}
        missing = [m for m in self.required if not _installed(m, names, cfg)]
        report["missing_models"] = [
            {"model": m.required, "configured": m.configured, "pull": m.pull_command}
            for m in missing
        ]
        report["pull_commands"] = [m.pull_command for m in missing]
        if missing:
            reasons.append("missing models: " + ", ".join(m.required for m in missing))
        if cfg.use_quantized:
            report["quantized_models"] = {
                m.configured: _installed(m, names, cfg) or None for m in self.required
            }
        try:
            loaded = await self._call(self._client.running_models, "/api/ps")
        except _CheckFailed as failure:
            loaded = []
            reasons.append(f"/api/ps failed: {failure}")
        report["models_loaded"] = [_model_name(m) for m in loaded]
        report["models_loaded_detail"] = [
            {
                "name": _model_name(m),
                "size_mb": _mb(m.get("size") or sizes.get(_model_name(m))),
                "size_vram_mb": _mb(m.get("size_vram")),
            }
            for m in loaded
        ]
        used = sum(d["size_mb"] for d in report["models_loaded_detail"])
        report["memory_used_by_models_mb"] = round(used, 1)
        available, source = self._memory(used)
        report["memory_available_mb"] = available
        report["memory_source"] = source
        if available is not None and available < cfg.min_memory_mb:
            reasons.append(f"memory low: ~{available:g} MB available < {cfg.min_memory_mb:g} MB")
        report["context_window"] = self.safe_context_window(available)
        report["status"] = DEGRADED if reasons else HEALTHY
        report["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return report

    async def _call(self, call: Callable[[], Any], path: str) -> list[dict[str, Any]]:
        timeout = self.config.timeout_s
        try:
            async with asyncio.timeout(timeout):
                result = await call()
        except TimeoutError:
            raise _CheckFailed(f"{path} did not answer within {timeout:g} s") from None
        except _CheckFailed:
            raise
        except httpx.HTTPError as error:
            raise _CheckFailed(f"{path}: {type(error).__name__}") from None
        except Exception as error:  # the provider's typed errors (ProviderUnavailable, ...)
            message = getattr(error, "message", None) or type(error).__name__
            raise _CheckFailed(f"{path}: {message}") from None
        if not isinstance(result, list):
            raise _CheckFailed(f"{path} answered without a model list")
        return [m for m in result if isinstance(m, dict)]

    def _memory(self, used_mb: float) -> tuple[float | None, str]:
        budget = self.config.memory_budget_mb
        if budget is not None:
            return round(max(0.0, budget - used_mb), 1), "configured_budget"
        if self._memory_probe is not None:
            try:
                probed = self._memory_probe()
            except Exception:
                log.debug("memory probe failed", exc_info=True)
                probed = None
            if probed is not None:
                return round(float(probed), 1), "host_meminfo"
        return None, "unknown"

    async def _fallback(self) -> tuple[bool, dict[str, bool]]:
        extra = self.config.fallback_provider is not None
        if self._chains is None:
            return extra, {}
        try:
            chains = await asyncio.to_thread(self._chains)
        except Exception as error:
            log.warning("could not read the fallback chains: %s", error)
            return extra, {}
        return fallback_configured(chains, extra), fallback_by_usage_type(chains, extra)

    def _remember(self, report: dict[str, Any]) -> None:
        previous = self._state.report
        self._state.report = report
        self._state.checks += 1
        self._state.history.append(report["status"])
        del self._state.history[:-20]
        window = int(report["context_window"])
        if window != self._state.context_window:
            log.info(
                "ollama context window %s -> %d tokens (memory_available_mb=%s, source=%s)",
                self._state.context_window,
                window,
                report["memory_available_mb"],
                report["memory_source"],
            )
            self._state.context_window = window
            known = report["memory_source"] != "unknown"
            if known and self._owned is None and hasattr(self._client, "num_ctx"):
                self._client.num_ctx = window
        before = previous["status"] if previous else None
        if before is not None and before != report["status"]:
            level = logging.INFO if report["status"] == HEALTHY else logging.WARNING
            log.log(
                level,
                "ollama health %s -> %s at %s%s",
                before,
                report["status"],
                self.base_url,
                f": {'; '.join(report['reasons'])}" if report["reasons"] else "",
            )

    # -- start-up and background refresh --------------------------------------------------
    async def start(self) -> dict[str, Any]:
        """First check (never raises), a clear log of what is wrong, then the refresh loop."""
        report = await self.check()
        self.log_startup(report)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="ollama-health")
        return report

    def log_startup(self, report: Mapping[str, Any]) -> None:
        status = report["status"]
        if status == UNAVAILABLE:
            log.error(
                "Ollama is not available at %s (%s). The service keeps running degraded: "
                "local models are skipped. Troubleshooting: %s Once it runs, make sure the "
                "models are there: %s",
                self.base_url,
                report["error"],
                " ".join(TROUBLESHOOTING),
                "; ".join(m.pull_command for m in self.required),
            )
        elif report["missing_models"]:
            log.error(
                "Ollama at %s lacks required models %s. Pull them with: %s. The service keeps "
                "running degraded until they are there.",
                self.base_url,
                ", ".join(m["model"] for m in report["missing_models"]),
                "; ".join(report["pull_commands"]),
            )
        elif status == DEGRADED:
            log.warning("Ollama at %s is degraded: %s", self.base_url, "; ".join(report["reasons"]))
        else:
            log.info(
                "Ollama at %s is healthy: models %s, memory_available_mb=%s (%s), "
                "context window %d",
                self.base_url,
                ", ".join(report["required_models"]),
                report["memory_available_mb"],
                report["memory_source"],
                report["context_window"],
            )
        if not report["fallback_configured"]:
            log.warning(
                "No fallback past Ollama is configured (INFERENCE_FALLBACK_PROVIDER or a "
                "non-Ollama entry in the chains that use Ollama); continuing without one."
            )

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.interval_s)
            try:
                await self.check()
            except Exception:  # a bug in one check must not end the monitoring
                log.exception("ollama health check failed unexpectedly")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._owned is not None:
            await self._owned.aclose()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()


def health_component(monitor: OllamaHealthMonitor | None) -> dict[str, Any]:
    """The `ollama` component of `GET /health` (queries/health.py): never `down`, since the
    service answers without Ollama; `degraded` whenever Ollama is not healthy."""
    if monitor is None:
        return {"status": "ok", "detail": "not monitored"}
    report = monitor.report
    if report is None:
        return {"status": "degraded", "detail": "not checked yet"}
    return {
        "status": "ok" if report["status"] == HEALTHY else "degraded",
        "ollama_status": report["status"],
        "base_url": report["base_url"],
        "missing_models": [m["model"] for m in report["missing_models"]],
        "error": report["error"],
        "fallback_configured": report["fallback_configured"],
    }
