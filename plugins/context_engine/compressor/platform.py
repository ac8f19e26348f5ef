"""``compression.platform``: the model platform's own context management, when the client has it.

The compressor builds the vendor's edits from its settings and hands them to the main model
client (:meth:`hermes_core.kinds.LLMClient.platform_context`). What changes then:

* ``clear_tool_uses_20250919``: the server clears old tool results from what the model reads; the
  kernel's history and archive keep them (the archive stores what the kernel saw). The engine's
  ``should_compress`` trusts the server's figures (usage reports, ``count_tokens`` counted with
  the edits) instead of its local estimate of the uncleared history.
* ``compact_20260112``: the server compacts; the engine's automatic local compaction stands
  down, and the agent loop turns a response carrying a compaction block into a child session.

When the client cannot (another client) or the server refuses the edits, the local path runs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CLEAR_THINKING", "CLEAR_TOOL_USES", "COMPACT", "PlatformSettings", "build_edits"]

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"


class PlatformSettings(BaseModel):
    """The ``compression.platform`` section; absent (the default) = the local path only."""

    model_config = ConfigDict(extra="forbid")

    #: the platform features to use, by the vendor's edit names
    features: list[str] = Field(default_factory=lambda: [CLEAR_TOOL_USES])
    #: context editing starts clearing once a prompt reaches this many input tokens
    clear_trigger_tokens: int = Field(default=100_000, ge=1)
    #: the most recent tool uses kept uncleared
    keep_tool_uses: int = Field(default=3, ge=0)
    #: clear only when at least this many tokens go (0: any amount)
    clear_at_least_tokens: int = Field(default=0, ge=0)
    #: tools whose results are never cleared
    exclude_tools: list[str] = Field(default_factory=list)
    #: server compaction starts at this many input tokens
    compaction_trigger_tokens: int = Field(default=150_000, ge=1)
    #: extra instructions for the server's summary
    compaction_instructions: str | None = None

    @field_validator("features")
    @classmethod
    def _features(cls, value: list[str]) -> list[str]:
        seen = set()
        for name in value:
            if name in seen:
                raise ValueError(f"compression.platform.features lists {name!r} twice")
            seen.add(name)
        return value


def build_edits(settings: PlatformSettings, *,
                thinking: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """``(edits, notes)``: the ``context_management.edits`` objects for ``settings`` (shaped as
    the SDK's ``BetaClearToolUses20250919EditParam`` / ``BetaCompact20260112EditParam``); a name
    the engine has no settings for goes as ``{"type": name}`` so the client can say whether its
    SDK knows it. ``notes`` say what was left out and why."""
    edits: list[dict[str, Any]] = []
    notes: list[str] = []
    for name in settings.features:
        if name == CLEAR_TOOL_USES:
            edit: dict[str, Any] = {
                "type": name,
                "trigger": {"type": "input_tokens", "value": settings.clear_trigger_tokens},
                "keep": {"type": "tool_uses", "value": settings.keep_tool_uses},
            }
            if settings.clear_at_least_tokens:
                edit["clear_at_least"] = {"type": "input_tokens",
                                          "value": settings.clear_at_least_tokens}
            if settings.exclude_tools:
                edit["exclude_tools"] = list(settings.exclude_tools)
            edits.append(edit)
        elif name == COMPACT:
            edit = {"type": name,
                    "trigger": {"type": "input_tokens", "value": settings.compaction_trigger_tokens}}
            if settings.compaction_instructions:
                edit["instructions"] = settings.compaction_instructions
            edits.append(edit)
        elif name == CLEAR_THINKING:
            if thinking:
                edits.insert(0, {"type": name, "keep": {"type": "thinking_turns", "value": 1}})
            else:
                notes.append(f"{CLEAR_THINKING} is not sent: the agent's requests carry no "
                             "extended thinking")
        else:
            edits.append({"type": name})
    return edits, notes
