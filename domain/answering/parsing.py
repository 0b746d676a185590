"""Reading the model's answer: the JSON contract of the base prompt (LLM-16.2), the safe
fallback when it cannot be read, and title clamping (LLM-21.1)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from domain.llm import strip_reasoning as _split_reasoning

EVIDENCE_TYPES = frozenset({"graph", "chunk", "doc"})
REQUIRED_KEYS = ("answer", "evidence", "next_actions", "warnings")
SAFE_FALLBACK_ANSWER = (
    "The model's output could not be read, so no answer can be given from it. "
    "Please retry, or ask another endpoint."
)
MALFORMED_WARNING = "Malformed LLM output"
TITLE_MIN_WORDS = 3
TITLE_MAX_WORDS = 7
UNTITLED = "Untitled lineage question"

_WHOLE_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_JSON_FENCE = re.compile(r"```(?:json|JSON)\s*\n(.*?)\n\s*```", re.DOTALL)


def strip_reasoning(text: str) -> str:
    """Drop `<think>...</think>` and a code fence around the JSON (`` ```json ... ``` ``)."""
    answer, _ = _split_reasoning(text)
    whole = _WHOLE_FENCE.match(answer)
    if whole:
        return whole.group(1).strip()
    fenced = _JSON_FENCE.search(answer)
    if fenced:
        return fenced.group(1).strip()
    return answer.strip()


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """One `evidence` item the model returned: `type` graph|chunk|doc, `id` a URN or SourceId."""

    type: str
    id: str
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id, "note": self.note}


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The model's answer in the base prompt's contract. `problems` lists what was repaired
    (an evidence item without an id was dropped, a missing note defaulted to "")."""

    answer: str
    evidence: tuple[EvidenceRef, ...]
    next_actions: tuple[str, ...]
    warnings: tuple[str, ...]
    problems: tuple[str, ...] = ()

    @property
    def evidence_ids(self) -> list[str]:
        return [e.id for e in self.evidence]

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "evidence": [e.to_dict() for e in self.evidence],
            "next_actions": list(self.next_actions),
            "warnings": list(self.warnings),
        }


def parse_answer(text: str) -> ParsedAnswer | None:
    """The first JSON object of the text in the answer contract, or None when there is none."""
    parsed, _ = try_parse_answer(text)
    return parsed


def try_parse_answer(text: str) -> tuple[ParsedAnswer | None, str]:
    """Like `parse_answer`, with the reason of a failure (safe to log; never the text itself)."""
    obj = first_json_object(strip_reasoning(text))
    if obj is None:
        return None, "no JSON object in the output"
    missing = [k for k in REQUIRED_KEYS if k not in obj]
    if missing:
        return None, f"missing keys: {', '.join(missing)}"
    if not isinstance(obj["answer"], str):
        return None, "'answer' is not a string"
    for key in ("evidence", "next_actions", "warnings"):
        if not isinstance(obj[key], list):
            return None, f"'{key}' is not a list"
    problems: list[str] = []
    evidence = tuple(_evidence(obj["evidence"], problems))
    return (
        ParsedAnswer(
            answer=obj["answer"].strip(),
            evidence=evidence,
            next_actions=_strings(obj["next_actions"]),
            warnings=_strings(obj["warnings"]),
            problems=tuple(problems),
        ),
        "",
    )


def first_json_object(text: str) -> dict[str, Any] | None:
    """The whole text as a JSON object, else the first object in it holding an "answer" key,
    else the first object at all."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    start = text.find("{")
    while start >= 0:
        try:
            found, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(found, dict):
            if "answer" in found:
                return found
            first = first or found
        start = text.find("{", end)
    return first


def _evidence(items: list[Any], problems: list[str]) -> list[EvidenceRef]:
    refs: list[EvidenceRef] = []
    for position, item in enumerate(items):
        if isinstance(item, str) and item.strip():
            refs.append(EvidenceRef(evidence_type_of(item.strip()), item.strip()))
            continue
        if not isinstance(item, dict) or not str(item.get("id") or "").strip():
            problems.append(f"evidence item {position} has no id; dropped")
            continue
        ident = str(item["id"]).strip()
        kind = str(item.get("type") or "").strip().lower()
        if kind not in EVIDENCE_TYPES:
            kind = evidence_type_of(ident)
        note = item.get("note")
        refs.append(EvidenceRef(kind, ident, "" if note is None else str(note)))
    return refs


def evidence_type_of(ident: str) -> str:
    """Guess an evidence type from its id: chunk URNs and SourceIds are chunks, file URNs docs,
    any other URN a graph entity."""
    if ident.startswith("urn:li:chunk:") or not ident.startswith("urn:"):
        return "chunk"
    if ident.startswith("urn:li:file:"):
        return "doc"
    return "graph"


def _strings(items: list[Any]) -> tuple[str, ...]:
    return tuple(str(i).strip() for i in items if i is not None and str(i).strip())


def safe_fallback(reason: str) -> dict[str, Any]:
    """The answer returned when the model's output cannot be read (LLM-16.2)."""
    return {
        "answer": SAFE_FALLBACK_ANSWER,
        "evidence": [],
        "next_actions": ["Retry the question, or rephrase it more narrowly."],
        "warnings": [f"{MALFORMED_WARNING}: {reason}"],
    }


def title_words_ok(title: str) -> bool:
    """A title has 3 to 7 words."""
    return TITLE_MIN_WORDS <= len(title.split()) <= TITLE_MAX_WORDS


_TITLE_PREFIX = re.compile(r"^(?:title\s*:\s*)", re.IGNORECASE)
_TITLE_EDGE = re.compile(r"^[\s\"'`*#>\-]+|[\s\"'`*.!?:;,]+$")


def clamp_title(text: str) -> str:
    """Make a model's title 3-7 words: first line, no quotes or markdown, at most 7 words; a
    shorter one is prefixed with "Question about"."""
    body = strip_reasoning(text)
    obj = first_json_object(body) if "{" in body else None
    if obj is not None and isinstance(obj.get("answer"), str):
        body = obj["answer"]
    line = next((ln for ln in body.splitlines() if ln.strip()), "")
    line = _TITLE_EDGE.sub("", _TITLE_PREFIX.sub("", _TITLE_EDGE.sub("", line)))
    words = line.split()
    if not words:
        return UNTITLED
    if len(words) > TITLE_MAX_WORDS:
        words = words[:TITLE_MAX_WORDS]
    elif len(words) < TITLE_MIN_WORDS:
        words = ["Question", "about", *words]
    return _TITLE_EDGE.sub("", " ".join(words))
