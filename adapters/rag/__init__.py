"""RAG providers (`domain.rag_provider`): this service's own collections, and another upstream
instance over HTTP. Importing a provider's module registers it."""
