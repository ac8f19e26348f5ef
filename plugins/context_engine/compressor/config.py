"""The ``compression:`` section of config.yaml (the compressor engine's settings)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hermes_core.compaction.settings import CompactionSettings, check_fraction

from .platform import PlatformSettings

__all__ = ["CompactionSettings", "CompressorConfig", "PlatformSettings", "check_fraction"]


class CompressorConfig(CompactionSettings):
    """Settings of the ``compressor`` engine; every key has one meaning."""

    #: pass 1 clears older tool results longer than this many characters
    prune_min_chars: int = Field(default=200, ge=0)
    #: when pass 1 alone brings the history under this fraction of the threshold, no summary is
    #: made (no LLM call, nothing summarised); 0 always summarises
    prune_only_below: float = Field(default=0.6, ge=0, lt=1)
    #: summary budget: this fraction of the compacted content ...
    summary_ratio: float = Field(default=0.20, gt=0, le=1)
    #: ... at least this many tokens ...
    summary_min_tokens: int = Field(default=2_000, ge=100)
    #: ... and at most min(summary_window_fraction x window, summary_max_tokens)
    summary_max_tokens: int = Field(default=12_000, ge=100)
    summary_window_fraction: float = Field(default=0.05, gt=0, le=0.5)
    #: the summariser's whole input (turns + previous summary + memory context) stays under this
    summary_input_max_tokens: int = Field(default=40_000, ge=2_000)
    #: each compacted message is clipped to this many tokens in the summariser's input
    summary_message_max_tokens: int = Field(default=2_000, ge=100)
    #: the summary model; default llm.auxiliary_model, else llm.model
    summary_model: str | None = None
    #: seconds before a summary call is abandoned (then the extractive summary is used)
    summary_timeout: float = Field(default=120.0, gt=0, le=3600)
    #: what a failed summary call does: ``fallback`` (extractive summary, the default) or
    #: ``abort`` (leave the history unchanged and say so)
    on_summary_failure: Literal["fallback", "abort"] = "fallback"
    #: after a failed summary call the model is not asked again for this long (doubling per
    #: consecutive failure, at most 15 minutes); the extractive summary is used meanwhile
    failure_cooldown_seconds: float = Field(default=60.0, ge=0)
    #: the model platform's own context management (context editing, server compaction) when
    #: the main model client supports it; absent: the local path only (docs/context-engines.md)
    platform: PlatformSettings | None = None

    @model_validator(mode="after")
    def _summary_bounds(self) -> CompressorConfig:
        if self.summary_min_tokens > self.summary_max_tokens:
            raise ValueError(
                f"compression.summary_min_tokens ({self.summary_min_tokens}) is larger than "
                f"compression.summary_max_tokens ({self.summary_max_tokens}); lower the first "
                "or raise the second"
            )
        return self
