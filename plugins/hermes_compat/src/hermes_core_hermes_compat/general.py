"""What a Hermes ``register(ctx)`` registers besides a provider or engine: hooks, tools, commands.

Hermes Agent 0.19.0 lets a *general* plugin register lifecycle hooks (``ctx.register_hook``),
tools (``ctx.register_tool``) and commands (``ctx.register_command``,
``ctx.register_cli_command``). The bridge runs them through the hermes-core provider
``hermes-<name>`` that stands for the plugin (selected in ``memory.providers``): each Hermes hook
is called from the hermes-core hook that fires at the same point of a turn (:data:`DELIVERED`),
with the keyword arguments Hermes passes there; a Hermes hook with no hermes-core counterpart is
named, never dropped silently (:data:`UNMAPPED`, shown by ``hermes-core hermes plugins`` and as a
warning of the plugin).

This module holds the tables and the pure parts: the registered callables (:class:`Registered`),
calling a hook's callbacks one by one so that one raising spoils nothing (:func:`fire`), reading
``pre_llm_call`` and ``pre_tool_call`` answers as Hermes does, and the hermes-core tools made from
``register_tool`` entries. The provider adapter (:mod:`.adapter_memory`) decides when.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .convert import call_with, tool_spec

__all__ = [
    "DELIVERED",
    "PARTIAL",
    "SKILL_CHARS",
    "UNMAPPED",
    "HooksOnly",
    "Registered",
    "RegisteredCommand",
    "RegisteredSkill",
    "RegisteredTool",
    "available",
    "awaited",
    "block_message",
    "fire",
    "injected_context",
    "post_tool_fields",
    "result_text",
    "run_handler",
    "skill_schema",
    "skill_text",
    "skill_tool_name",
    "tool_schema",
    "transformed",
    "unmapped_hooks",
]

#: Hermes hook -> the hermes-core hook it is called from (the same point of a turn)
DELIVERED: dict[str, str] = {
    "on_session_start": "on_session_switch (reason new): a brand-new session, not a resume or "
                        "a compaction's child",
    "pre_llm_call": "prefetch: once per user turn before the first model call; the context it "
                    "returns is added to the API copy of the user message",
    "post_llm_call": "sync_turn: once per completed turn",
    "on_session_end": "sync_turn, after post_llm_call (on_turn_cancelled for a cancelled turn, "
                      "interrupted): Hermes 0.19.0 fires it at the end of every turn "
                      "(run_conversation), not at a session's end",
    "on_session_finalize": "on_session_end: the session really ends (exit, /new, expiry)",
    "on_session_reset": "on_session_switch (reason new after /new, or reset)",
    "pre_tool_call": "on_pre_tool_call: before every tool call hermes-core makes (its own "
                     "tools, MCP tools, Hermes plugins' tools); a block answers the call",
    "post_tool_call": "on_post_tool_call: after every tool call hermes-core made or blocked",
    "transform_tool_result": "after each tool call of a Hermes plugin or provider: a string "
                             "replaces the result",
    "subagent_start": "on_message: a delegated child session's first user message (its task), "
                      "fired on the delegating session's side",
    "subagent_stop": "on_delegation: once per finished child, on the delegating session's side",
}

#: delivered only in part: hermes-core's hook after a tool call observes, it cannot replace
PARTIAL: dict[str, str] = {
    "transform_tool_result": "only the results of Hermes plugins' tools are replaced; "
                             "on_post_tool_call observes hermes-core's own tools' results and "
                             "cannot change them"}

#: Hermes hook -> why hermes-core has no counterpart (it is never called)
UNMAPPED: dict[str, str] = {
    "transform_terminal_output": "hermes-core has no terminal tool",
    "transform_llm_output": "no hermes-core hook may replace the reply text",
    **dict.fromkeys(("pre_api_request", "post_api_request"),
                    "no hermes-core hook around each model call reaches a plugin other than the "
                    "context engine"),
    "api_request_error": "no hermes-core hook for a failed model call",
    "pre_verify": "hermes-core has no verification loop",
    "pre_gateway_dispatch": "hermes-core's platforms dispatch messages without a plugin hook",
    **dict.fromkeys(("pre_approval_request", "post_approval_response"),
                    "hermes-core has no approval gate"),
    **dict.fromkeys(("kanban_task_claimed", "kanban_task_completed", "kanban_task_blocked"),
                    "hermes-core has no task board"),
    # hooks newer Hermes versions added (none is fired by 0.19.0)
    **dict.fromkeys(("on_stream_start", "on_stream_delta", "on_stream_end"),
                    "a newer Hermes hook: hermes-core streams a reply to its caller only"),
    "on_interim_message": "a newer Hermes hook: hermes-core sends no interim messages",
    "transform_api_error_classification": "a newer Hermes hook: no hermes-core hook may "
                                          "classify a failed model call",
    "on_skill_lifecycle": "a newer Hermes hook: no hermes-core hook reports skill changes",
    "agent_loop_stopped": "a newer Hermes gateway hook: a stopped turn ends with the per-turn "
                          "on_session_end (interrupted) instead",
    "on_room_member_activity": "a newer Hermes hook: hermes-core has no group chat rooms",
    "pre_transcription": "a newer Hermes hook: hermes-core transcribes no audio",
    **dict.fromkeys(("on_kanban_worker_spawned", "on_kanban_worker_exited",
                     "on_kanban_worker_stale_claim", "on_kanban_task_updated",
                     "on_kanban_dispatch_tick"), "a newer Hermes hook: hermes-core has no task board"),
    "gateway_platform_event": "a newer Hermes hook: hermes-core's platforms report no such "
                              "events to plugins",
    "pre_command": "a newer Hermes hook: no hermes-core hook runs before a command",
}

#: what Hermes adds to every hook call (its observer payload version)
_TELEMETRY = {"telemetry_schema_version": 1}


@dataclass
class RegisteredTool:
    """One ``ctx.register_tool(...)`` call."""

    name: str
    toolset: str
    schema: Any
    handler: Callable[..., Any]
    check_fn: Callable[[], Any] | None = None
    is_async: bool = False
    description: str = ""


@dataclass
class RegisteredCommand:
    """One ``ctx.register_command`` (``slash``: ``handler(raw_args)``) or
    ``ctx.register_cli_command`` (``cli``: argparse ``setup_fn(parser)``, ``handler_fn(args)``)
    call; run by :mod:`.hermes_commands`."""

    kind: str  #: ``slash`` or ``cli``
    name: str
    help: str = ""
    handler: Callable[..., Any] | None = None
    setup_fn: Callable[..., Any] | None = None

    @property
    def spelled(self) -> str:
        """As Hermes spells it: ``/name`` or ``hermes name``."""
        return f"/{self.name}" if self.kind == "slash" else f"hermes {self.name}"


@dataclass
class RegisteredSkill:
    """One ``ctx.register_skill(name, path, description)`` call: a read-only SKILL.md."""

    name: str
    path: Path
    description: str = ""

    def summary(self) -> str:
        """Its description, else the first text line of the file (no heading marks)."""
        if self.description:
            return self.description
        try:
            with self.path.open(encoding="utf-8", errors="replace") as f:
                for line in f:
                    text = line.strip().lstrip("#").strip()
                    if text and text != "---" and ":" not in text[:20]:
                        return text[:160]
        except OSError:
            pass
        return ""


@dataclass
class Registered:
    """The hooks, tools and commands one ``register(ctx)`` call registered."""

    hooks: dict[str, list[Callable[..., Any]]] = field(default_factory=dict)
    tools: list[RegisteredTool] = field(default_factory=list)
    #: slash and CLI commands (``hermes-core hermes NAME``, ``hermes-core hermes slash NAME``)
    commands: list[RegisteredCommand] = field(default_factory=list)
    #: read-only skills, offered through one tool (:func:`skill_tool_name`)
    skills: list[RegisteredSkill] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.hooks or self.tools or self.commands or self.skills)

    def has(self, hook: str) -> bool:
        return bool(self.hooks.get(hook))


def unmapped_hooks(registered: Registered) -> list[str]:
    """``name: reason`` for each registered hook that is not delivered (or only in part)."""
    out = []
    for name in registered.hooks:
        if name in PARTIAL:
            out.append(f"{name} (partly: {PARTIAL[name]})")
        elif name not in DELIVERED:
            why = UNMAPPED.get(name, "not a hook Hermes 0.19.0 defines")
            out.append(f"{name} ({why})")
    return out


class HooksOnly:
    """The provider object of a plugin that registered hooks or tools but no provider: it is
    always available and keeps nothing itself."""

    name = "hooks"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        return None

    def get_tool_schemas(self) -> list[Any]:
        return []


def fire(registered: Registered, hook: str, problem: Callable[[str], None],
         **kwargs: Any) -> list[Any]:
    """Call every callback of ``hook`` in registration order with the keyword arguments it
    accepts; the non-``None`` answers, as Hermes' ``invoke_hook``. A callback that raises is
    reported through ``problem`` and the others still run."""
    answers = []
    for callback in registered.hooks.get(hook, ()):
        try:
            value = awaited(call_with(callback, **_TELEMETRY, **kwargs))
        except Exception as exc:
            problem(f"its {hook} hook {getattr(callback, '__name__', '?')} raised "
                    f"{type(exc).__name__}: {exc}")
            continue
        if value is not None:
            answers.append(value)
    return answers


def awaited(value: Any, *, always: bool = False) -> Any:
    """``value``, or, when it is awaitable (an async callback's coroutine) or ``always``, what
    it gives awaited to its end."""
    if not (always or inspect.isawaitable(value)):
        return value

    async def wait() -> Any:
        return await value
    return asyncio.run(wait())


def injected_context(answers: list[Any]) -> str | None:
    """The text ``pre_llm_call`` answers add to the user message: ``{"context": text}`` or a
    non-blank string each, joined by a blank line; anything else is ignored, as in Hermes."""
    parts = []
    for answer in answers:
        if isinstance(answer, dict) and answer.get("context"):
            parts.append(str(answer["context"]))
        elif isinstance(answer, str) and answer.strip():
            parts.append(answer)
    return "\n\n".join(parts) or None


def block_message(answers: list[Any], tool: str) -> str | None:
    """The message a ``pre_tool_call`` answer blocks the call with, or ``None``.

    ``{"action": "block", "message": text}`` blocks; ``{"action": "approve", ...}`` asks for a
    person's approval, which hermes-core has no gate for, so it blocks too (Hermes blocks when
    its gate fails). The first valid directive wins; other answers are ignored."""
    for answer in answers:
        if not isinstance(answer, dict):
            continue
        action, message = answer.get("action"), answer.get("message")
        message = message if isinstance(message, str) and message else None
        if action == "block" and message:
            return message
        if action == "approve":
            return (f"BLOCKED: plugin approval required for {tool} (hermes-core has no approval "
                    f"gate){': ' + message if message else ''}")
    return None


def tool_schema(entry: RegisteredTool) -> tuple[str, str, dict[str, Any]]:
    """(name, description, parameters) of a registered tool; ``ValueError`` when hermes-core
    cannot express it or its schema names another tool."""
    name, description, params = tool_spec(entry.schema)
    if name != entry.name:
        raise ValueError(f"tool {entry.name!r} was registered with a schema named {name!r}")
    return name, description or entry.description, params


def available(entry: RegisteredTool) -> bool:
    """Whether the tool's ``check_fn`` lets it be offered (no check_fn: yes). Raises what the
    check raises."""
    return entry.check_fn is None or bool(entry.check_fn())


def run_handler(entry: RegisteredTool, args: dict[str, Any], **kwargs: Any) -> Any:
    """Call a registered tool's handler as Hermes' registry does: ``handler(args, **kwargs)``
    (only the keyword arguments it accepts), awaiting an async one."""
    return awaited(call_with(entry.handler, args, **kwargs), always=entry.is_async)


def transformed(peers: list[Callable[..., list[Any]]], base: dict[str, Any], text: str) -> str:
    """The result of a Hermes tool after the ``transform_tool_result`` hooks of every live
    bridged plugin (``peers``: each fires one of its hooks by name and keyword arguments,
    answering the list of answers): the first string answer replaces it, as in Hermes."""
    for fire_hook in peers:
        answers = fire_hook("transform_tool_result", result=text, status="ok", error_type=None,
                            error_message=None, **base)
        replaced = next((a for a in answers if isinstance(a, str)), None)
        if replaced is not None:
            return replaced
    return text


def post_tool_fields(content: str, is_error: bool, blocked: bool, seconds: float
                     ) -> dict[str, Any]:
    """What Hermes' ``post_tool_call`` receives about a call's end, from a hermes-core outcome:
    ``result`` (the text the model reads), ``duration_ms``, ``status`` (``ok``, ``error`` or
    ``blocked``), ``error_type`` and ``error_message``."""
    status = "blocked" if blocked else "error" if is_error else "ok"
    return {"result": content, "duration_ms": int(seconds * 1000), "status": status,
            "error_type": {"blocked": "plugin_block", "error": "tool_error"}.get(status),
            "error_message": content if status != "ok" else None}


#: the longest skill text a skill tool answers with (a SKILL.md is a page or two)
SKILL_CHARS = 60_000


def skill_tool_name(plugin: str) -> str:
    """The tool that shows a plugin's skills: ``<plugin>_skill`` in tool-name characters."""
    return (re.sub(r"[^A-Za-z0-9_]+", "_", plugin).strip("_")[:58] or "hermes") + "_skill"


def skill_schema(plugin: str, skills: list[RegisteredSkill]) -> dict[str, Any]:
    """(description, parameters) of a plugin's skill tool, listing each skill."""
    listing = "; ".join(f"{s.name}: {s.summary()}" if s.summary() else s.name for s in skills)
    return {
        "description": (f"Read one of the skills (procedures) the Hermes plugin {plugin!r} ships, "
                        f"by name. Skills: {listing}")[:1024],
        "parameters": {"type": "object", "properties": {"name": {
            "type": "string", "enum": [s.name for s in skills],
            "description": "the skill's name"}}, "required": ["name"]},
    }


def skill_text(skills: list[RegisteredSkill], name: str) -> str:
    """The text of skill ``name``; ``LookupError`` naming the skills there are."""
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        raise LookupError(f"no skill {name!r}; the skills are: "
                          f"{', '.join(s.name for s in skills)}")
    text = skill.path.read_text(encoding="utf-8", errors="replace")
    return text if len(text) <= SKILL_CHARS else (
        text[:SKILL_CHARS] + f"\n[... {len(text) - SKILL_CHARS} more characters not shown]")


def result_text(value: Any) -> str:
    """A handler's answer as the text the model reads: text as it is, data as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
