"""The compaction settings every engine built on the shared cut understands.

:class:`CompactionSettings` holds the keys of the ``compression:`` section that are not about
summarising (when to compact, what to protect, the loop guards); an engine's own ``Config`` can
subclass it and add its keys.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CompactionSettings", "check_fraction"]


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
