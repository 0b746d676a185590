"""Knowledge-graph enrichment settings (`KG_*`), from the environment (and `.env`)."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from projections.kg_enrichment import EnrichmentOptions


class KGSettings(BaseSettings):
    """Enrichment runs only when a `kg_edge_creation` model is configured; these tune it."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    on_ingest: bool = Field(default=True, alias="KG_ENRICH_ON_INGEST")
    auto_accept_confidence: float | None = Field(default=None, alias="KG_AUTO_ACCEPT_CONFIDENCE")
    max_code_chars: int = Field(default=6000, alias="KG_MAX_CODE_CHARS", gt=100)
    max_proposals: int = Field(default=10, alias="KG_MAX_PROPOSALS", gt=0, le=100)
    breaker_failures: int = Field(default=3, alias="KG_BREAKER_FAILURES", gt=0)
    breaker_cooldown_s: float = Field(default=60.0, alias="KG_BREAKER_COOLDOWN", ge=0)

    @field_validator("auto_accept_confidence", mode="before")
    @classmethod
    def _off_is_none(cls, value: object) -> object:
        """Unset, empty or `off`: no auto-accept (the default). Else a confidence 0.0-1.0."""
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "off")):
            return None
        number = float(value)  # type: ignore[arg-type]
        if not 0.0 <= number <= 1.0:
            raise ValueError("KG_AUTO_ACCEPT_CONFIDENCE is a confidence between 0.0 and 1.0")
        return number

    def options(self) -> EnrichmentOptions:
        return EnrichmentOptions(
            on_ingest=self.on_ingest,
            auto_accept_confidence=self.auto_accept_confidence,
            max_code_chars=self.max_code_chars,
            max_proposals=self.max_proposals,
            breaker_failures=self.breaker_failures,
            breaker_cooldown_s=self.breaker_cooldown_s,
        )
