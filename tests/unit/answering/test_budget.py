"""Token counting and the budgets: history, chunks, deep context, model limits, templates."""

from __future__ import annotations

import pytest

from domain.answering.budget import (
    DEFAULT_LIMITS,
    MODEL_TOKEN_LIMITS,
    TokenBudget,
    chunk_tokens,
    count_tokens,
    fit_chunks,
    fit_deep_context,
    limits_for,
    template_budget,
    trim_to_tokens,
    truncate_history,
)
from tests.unit.answering.helpers import chunk, fact

pytestmark = pytest.mark.unit


def test_tokens_are_counted_with_cl100k():
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special tokens in text are plain text


def test_trim_to_tokens_keeps_a_prefix_within_the_limit():
    text = "select customer_id, sum(amount) from stg_orders group by 1"
    trimmed = trim_to_tokens(text, 5)
    assert text.startswith(trimmed) and count_tokens(trimmed) <= 5 and trimmed
    assert trim_to_tokens(text, 1000) == text and trim_to_tokens(text, 0) == ""
    assert "\ufffd" not in trim_to_tokens("héllo wörld ünïcode", 3)


@pytest.mark.spec("RAG-06")
def test_model_limits_follow_the_spec_table_and_default():
    assert limits_for("llama3.2").context_window == 8192
    assert limits_for("qwen3:8b")["max_response"] == 2048
    assert limits_for("deepseek-r1:32b").context_window == 65536
    assert limits_for("llama3.2:latest") is MODEL_TOKEN_LIMITS["llama3.2"]
    assert limits_for("Qwen3:8B") is MODEL_TOKEN_LIMITS["qwen3:8b"]
    assert limits_for("unknown-model") is DEFAULT_LIMITS and limits_for(None) is DEFAULT_LIMITS
    assert limits_for("mistralai/devstral-2512:free").context_window == 131072


HISTORY = [
    ("user", "what feeds customer_summary? " * 10),
    ("assistant", "stg_orders and stg_customers feed it. " * 10),
    ("user", "and what feeds stg_orders?"),
    ("assistant", "raw.orders feeds stg_orders."),
]


@pytest.mark.spec("RAG-15")
def test_history_over_budget_drops_the_oldest_messages():
    last_two = count_tokens("user: and what feeds stg_orders?") + count_tokens(
        "assistant: raw.orders feeds stg_orders."
    )
    text, tokens, dropped = truncate_history(HISTORY, last_two + 5)
    assert text == "user: and what feeds stg_orders?\nassistant: raw.orders feeds stg_orders."
    assert tokens == last_two and dropped == 2


@pytest.mark.spec("RAG-16")
def test_history_keeps_the_most_recent_and_always_the_last_user_message():
    text, tokens, dropped = truncate_history(HISTORY, 10_000)
    assert dropped == 0 and text.startswith("user: what feeds") and tokens > 0
    text, tokens, dropped = truncate_history(HISTORY, 3)
    assert text == "user: and what feeds stg_orders?"
    assert tokens == count_tokens(text) > 3 and dropped == 3
    only_user = [("user", "x " * 500)]
    text, tokens, dropped = truncate_history(only_user, 1)
    assert text.startswith("user: x") and tokens > 1 and dropped == 0
    assert truncate_history([], 100) == ("", 0, 0)


def test_chunks_are_dropped_lowest_score_first_and_keep_their_order():
    chunks = [
        chunk(index=i, text=f"chunk {i} " * 40, score=s) for i, s in enumerate([0.5, 0.9, 0.4, 0.7])
    ]
    each = chunk_tokens(chunks[0])
    kept, tokens = fit_chunks(chunks, each * 2 + 1)
    assert [c.chunk_index for c in kept] == [1, 3]
    assert tokens == chunk_tokens(chunks[1]) + chunk_tokens(chunks[3])
    assert fit_chunks(chunks, 0) == ([], 0)


@pytest.mark.spec("LLM-28.1")
def test_deep_context_keeps_graph_evidence_before_chunks_and_warns():
    facts = [fact("customer_summary", f"stg_{i}") for i in range(3)]
    chunks = [chunk(index=i, text="select 1 " * 300, score=0.9 - i / 10) for i in range(6)]
    fitted = fit_deep_context(facts, chunks, max_tokens=2000)
    assert fitted.facts == facts
    assert 0 < len(fitted.chunks) < 6
    assert fitted.omitted_chunks == 6 - len(fitted.chunks)
    assert (
        fitted.warning
        == f"Context truncated: {fitted.omitted_chunks} chunks omitted due to token limit"
    )
    assert [c.chunk_index for c in fitted.chunks] == list(range(len(fitted.chunks)))
    assert fitted.tokens <= 2000 and fitted.original_chunks == 6
    roomy = fit_deep_context(facts, chunks)
    assert roomy.warning is None and roomy.omitted_chunks == 0


def test_deep_context_counts_graph_paths_it_had_to_omit():
    facts = [fact("customer_summary", f"stg_{i}") for i in range(50)]
    fitted = fit_deep_context(facts, [chunk()], max_tokens=300)
    assert fitted.chunks == [] and fitted.omitted_facts > 0
    assert fitted.warning.startswith("Context truncated: 1 chunks omitted due to token limit (")


@pytest.mark.spec("RAG-06", "RAG-26")
def test_the_budget_reserves_system_and_response_then_history_then_chunks():
    system = "You answer from evidence. " * 20
    chunks = [chunk(index=i, text="select col from t " * 200, score=1 - i / 100) for i in range(20)]
    history = [("user", "earlier question " * 400), ("assistant", "earlier answer " * 400)] * 3 + [
        ("user", "what feeds orders?")
    ]
    allocation = TokenBudget("llama3.2").allocate(system, history, chunks)
    limits = MODEL_TOKEN_LIMITS["llama3.2"]
    assert allocation.system_prompt == system and allocation.system_tokens == count_tokens(system)
    assert allocation.history.endswith("user: what feeds orders?")
    assert allocation.history_tokens <= limits.max_history and allocation.dropped_messages > 0
    assert allocation.dropped_chunks > 0
    assert [c.chunk_index for c in allocation.chunks] == list(range(len(allocation.chunks)))
    assert allocation.prompt_tokens + allocation.response_tokens <= limits.context_window
    capped = TokenBudget("llama3.2", max_context_tokens=1000).allocate(system, [], chunks)
    assert capped.context_tokens <= 1000 and capped.to_dict()["dropped_chunks"] > 0


@pytest.mark.spec("LLM-40.3")
def test_template_budget_splits_the_window_5_10_60_5_20():
    budget = template_budget(8192)
    assert budget == {
        "system": 409,
        "project": 819,
        "retrieval": 4915,
        "question": 409,
        "response": 1638,
    }
    assert sum(budget.values()) <= 8192
