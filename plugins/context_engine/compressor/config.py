"""The ``compression:`` section of config.yaml (the compressor engine's settings)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["CompressorConfig", "check_fraction"]


def check_fraction(value: float, key: str, example: str) -> float:
    """``value`` if it is strictly between 0 and 1, else a ValueError saying how to fix it."""
    if 0 < value < 1:
        return value
    hint = f" Did you mean {value / 100:g}?" if 1 < value < 100 else ""
    raise ValueError(
        f"{key} is a fraction strictly between 0 and 1 (e.g. {example}), got {value:g}.{hint}"
    )


class CompactionSettings(BaseModel):
    """When to compact and what to protect: the keys every engine built on the same cut shares."""

    model_config = ConfigDict(extra="forbid")
    #: the config section, for error messages
    section: ClassVar[str] = "compression"

    #: compact automatically; ``false`` leaves only manual ``/compress``
    enabled: bool = True
    #: compact when the prompt reaches this fraction of the model's context window
    threshold: float = 0.50
    #: the protected tail keeps ``threshold x target_ratio`` tokens (x the window)
    target_ratio: float = 0.20
    #: messages kept verbatim at the start (before the first compaction only)
    protect_first_n: int = Field(default=3, ge=0, le=1_000)
    #: the protected tail never has fewer messages than this
    protect_last_n: int = Field(default=20, ge=1, le=10_000)
    #: pre-flight compaction passes before one turn, at most
    max_passes: int = Field(default=3, ge=1, le=10)
    #: compactions per turn, at most (pre-flight passes included)
    max_per_turn: int = Field(default=3, ge=1, le=20)

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: float) -> float:
        return check_fraction(value, f"{cls.section}.threshold", "0.5 to compact at half the window")

    @field_validator("target_ratio")
    @classmethod
    def _target_ratio(cls, value: float) -> float:
        return check_fraction(value, f"{cls.section}.target_ratio", "0.2")


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
    summary_timeout: float = Field(default=120.0, gt=0)
    #: what a failed summary call does: ``fallback`` (extractive summary, the default) or
    #: ``abort`` (leave the history unchanged and say so)
    on_summary_failure: Literal["fallback", "abort"] = "fallback"
    #: after a failed summary call the model is not asked again for this long (doubling per
    #: consecutive failure, at most 15 minutes); the extractive summary is used meanwhile
    failure_cooldown_seconds: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _summary_bounds(self) -> CompressorConfig:
        if self.summary_min_tokens > self.summary_max_tokens:
            raise ValueError(
                f"compression.summary_min_tokens ({self.summary_min_tokens}) is larger than "
                f"compression.summary_max_tokens ({self.summary_max_tokens}); lower the first "
                "or raise the second"
            )
        return self
