"""LLM providers behind `domain.llm.LLMProvider`: Ollama, OpenAI-compatible, extractive."""
