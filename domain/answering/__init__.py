"""Pure pieces of answering a question: intents, prompts, context serialization, citations,
grounding checks, confidence and routing, token budgets, retrieval quality, output parsing,
topic accumulation, entity extraction and tree synthesis. No I/O."""
