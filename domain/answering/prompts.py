# The spec's prompts are kept verbatim, long lines included.
# ruff: noqa: E501, RUF001
"""The chat prompts: the spec's base prompt and per-intent additions (verbatim), the
confidence prompt of rag-service.md, and validated templates with hallucination safeguards.

Do not reword the verbatim texts: they are the spec's, character for character.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.answering.errors import MissingTemplateVariable
from domain.answering.intents import Intent, profile

# llm-service.md, "Base prompt applied to all endpoints" (LLM-16.1), verbatim.
BASE_SYSTEM_PROMPT = """You are the Financial Lineage Tool assistant. Your job is to answer questions about data lineage, dependencies, transformations, and repository artifacts using ONLY the evidence provided in the request context (vector snippets, graph results, and metadata). Do not invent tables, columns, files, edges, or SQL logic.

Rules:
- Treat Neo4j/graph evidence as authoritative for lineage claims (upstream/downstream, DERIVES/READS_FROM, dependency edges).
- Treat vector snippets as supporting evidence (code or docs excerpts). If evidence is missing or ambiguous, say so and propose what to search next.
- Prefer precise, testable statements (file path, object name, query/view name, edge/path, confidence if provided).
- Never mention internal implementation details (no "I used Qdrant/Neo4j" unless asked). Just cite evidence identifiers passed in.
- Never output hidden reasoning. Provide final conclusions only.

Output format:
Return a single JSON object with:
{
  "answer": string,                  // concise, directly addresses the user
  "evidence": [                      // 0..N items
    { "type": "graph|chunk|doc", "id": string, "note": string }
  ],
  "next_actions": [string],          // 0..N suggested follow-ups (queries to run, entities to inspect)
  "warnings": [string]               // 0..N (missing evidence, conflicts, assumptions)
}

If the user asks for code changes, respond with steps and minimal patches, grounded in evidence."""

# llm-service.md, each endpoint's "prompt additions" (LLM-17.1 ... LLM-21.1), verbatim.
INTENT_ADDITIONS: dict[Intent, str] = {
    Intent.DEEP: """Additional rules for DEEP:
- Synthesize across graph evidence + multiple snippets. If they conflict, call it out and pick the most authoritative source.
- When explaining lineage, include: (a) the key path(s), (b) the transformation boundary (view/job/model), and (c) what to verify next.
- Keep the answer structured in paragraphs or bullets inside the "answer" string, but still emit valid JSON.""",
    Intent.GRAPH: """Additional rules for GRAPH:
- Answer using graph evidence first. If no graph evidence supports a lineage claim, do not claim it.
- Summarize nodes, edges, and paths clearly (entity names + relationship type). Avoid long prose.""",
    Intent.SEMANTIC: """Additional rules for SEMANTIC:
- Focus on the most relevant snippets and return a short summary.
- If the user asks lineage questions and no graph evidence is present, explicitly recommend calling /api/chat/deep or /api/chat/graph in next_actions.
- Keep "answer" under ~1200 characters unless the user explicitly asked for detail.""",
    Intent.TEXT: """Additional rules for TEXT:
- You have no retrieval context. Do not pretend you saw the repo or graph.
- Provide general guidance, and put specific "what I would need" items into next_actions.""",
    Intent.TITLE: """Additional rules for TITLE:
- Produce a short title (3–7 words) that describes the user's main intent. Output JSON with:
{ "answer": "<title>", "evidence": [], "next_actions": [], "warnings": [] }""",
}


def system_prompt(intent: Intent | str) -> str:
    """The base prompt followed by the intent's additions (LLM-16.1: additions are appended)."""
    return BASE_SYSTEM_PROMPT + "\n\n" + INTENT_ADDITIONS[Intent(intent)]


# Not in the spec's prompts: how to cite the SourceIds and URNs that `render_context` writes, so
# citations can be mapped deterministically (rag-service.md, "Citation Mapping").
CITATION_RULES = """Citations:
- Every evidence block in the context starts with its [SourceId: document:chunk] and its URN in brackets. Cite the SourceIds you rely on inline in "answer", e.g. [SourceId: doc-1a2b3c4d5e6f:2].
- Put the URN of every piece of evidence you used in "evidence" (type "chunk" for vector evidence, "graph" for graph evidence).
- Use only SourceIds and URNs that appear in the context; never make one up."""


def grounded_system_prompt(intent: Intent | str) -> str:
    """`system_prompt`, plus the citation rules for the intents that retrieve evidence."""
    base = system_prompt(intent)
    return base + "\n\n" + CITATION_RULES if profile(intent).retrieves else base


# rag-service.md, "RAG System Prompt (with context)", verbatim.
RAG_SYSTEM_PROMPT = """You are a helpful assistant that answers questions based ONLY on the provided context.

STRICT RULES:
1. ONLY use information from the provided CONTEXT sections below
2. If the context doesn't contain enough information, respond with: "I don't have enough information in the available documents to answer this question."
3. NEVER use external knowledge or make assumptions beyond the context
4. Cite sources using the exact SourceId provided (e.g., [SourceId: abc123:0])
5. Be concise but thorough
6. If partially answerable, answer what you can and note what's missing

CONTEXT (each section has a SourceId for citation):
{context}

PREVIOUS CONVERSATION:
{chat_history}
"""

# rag-service.md, "Confidence Evaluation Prompt", verbatim.
CONFIDENCE_PROMPT = """Evaluate how well this answer is supported by the provided context.

CONTEXT SUMMARY:
{context_summary}

QUESTION: {query}

ANSWER: {answer}

Rate the support level from 0-100:
- 90-100: Answer is fully and directly supported by context
- 70-89: Answer is mostly supported, minor inferences made
- 50-69: Answer is partially supported, some gaps filled
- 30-49: Answer has weak support, significant assumptions
- 0-29: Answer is not supported by context

Respond with ONLY a number between 0 and 100."""

# rag-service.md, "Query Classification Prompt", verbatim.
QUERY_CLASSIFIER_PROMPT = """Classify this query for retrieval optimization.

QUERY: {query}

Categories:
- FACTUAL: Seeking specific facts from documents
- PROCEDURAL: Asking how to do something
- CLARIFICATION: Follow-up on previous answer (use chat history)
- GREETING: Social interaction (still attempt retrieval, expect low relevance)

Respond with exactly one category."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A named prompt with `{placeholders}`; `format` refuses to run without a required one.

    `defaults` holds the optional variables (used when the caller does not give them). The
    placeholders of `text` must be exactly `required` plus the keys of `defaults`.
    """

    name: str
    text: str
    required: frozenset[str]
    defaults: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        found = placeholders(self.text)
        declared = set(self.required) | set(self.defaults)
        if found != declared:
            raise ValueError(
                f"template {self.name}: placeholders {sorted(found)} != declared {sorted(declared)}"
            )

    def format(self, **values: object) -> str:
        """Fill the template; raises MissingTemplateVariable when a required value is absent."""
        missing = {k for k in self.required if values.get(k) is None}
        if missing:
            raise MissingTemplateVariable(self.name, missing)
        filled = {**self.defaults, **{k: v for k, v in values.items() if v is not None}}
        return self.text.format(**{k: str(filled[k]) for k in self.required | set(self.defaults)})


def placeholders(text: str) -> set[str]:
    """The `{names}` a format string uses."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def confidence_prompt(context_summary: str, query: str, answer: str) -> str:
    """The LLM self-rating prompt of the hybrid confidence (rag-service.md)."""
    return CONFIDENCE_PROMPT.format(context_summary=context_summary, query=query, answer=answer)


# LLM-40.1/40.2: lineage and graph templates with explicit citation rules and hallucination
# safeguards: cite [file:line], say "Information not available", infer no relationship.
LINEAGE_QUERY = PromptTemplate(
    name="LINEAGE_QUERY",
    text="""You answer data lineage questions using ONLY the context below.

Rules:
- Every claim must reference the context: cite its source as [file:line], e.g. [models/orders.sql:12].
- If the context does not contain the information asked for, say exactly: "Information not available".
- Do not infer or assume relationships (upstream, downstream, reads, writes, derives) that the context does not state.
- Treat graph evidence as authoritative for lineage; code excerpts are supporting evidence.

PROJECT CONTEXT:
{project_context}

CONTEXT:
{context}

QUESTION: {question}""",
    required=frozenset({"context", "question"}),
    defaults={"project_context": "(none)"},
)

GRAPH_QUERY = PromptTemplate(
    name="GRAPH_QUERY",
    text="""You describe lineage paths using ONLY the graph evidence below; it is authoritative.

Rules:
- Every claim must reference the context: cite each edge's source as [file:line], e.g. [models/orders.sql:12].
- State only edges that appear in the graph evidence, as `node -[RELATIONSHIP]-> node`.
- If the graph evidence does not contain the information asked for, say exactly: "Information not available".
- Do not infer or assume relationships that are not listed, not even transitive ones the paths do not show.

GRAPH EVIDENCE:
{graph_context}

SUPPORTING CODE:
{context}

QUESTION: {question}""",
    required=frozenset({"graph_context", "question"}),
    defaults={"context": "(none)"},
)

TEMPLATES: dict[str, PromptTemplate] = {t.name: t for t in (LINEAGE_QUERY, GRAPH_QUERY)}


def template(name: str) -> PromptTemplate:
    """A template by name (KeyError names the known ones)."""
    try:
        return TEMPLATES[name]
    except KeyError:
        raise KeyError(f"unknown prompt template {name!r}; known: {sorted(TEMPLATES)}") from None
