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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .convert import call_with, tool_spec

__all__ = ["DELIVERED", "PARTIAL", "UNMAPPED", "HooksOnly", "Registered", "RegisteredTool",
           "available", "block_message", "fire", "guarded_call", "injected_context", "result_text",
           "run_handler",
           "tool_schema", "unmapped_hooks"]

#: Hermes hook -> the hermes-core hook it is called from (the same point of a turn)
DELIVERED: dict[str, str] = {
    "on_session_start": "on_session_switch (reason new): a brand-new session, not a resume or "
                        "a compaction's child",
    "pre_llm_call": "prefetch: once per user turn before the first model call; the context it "
                    "returns is added to the API copy of the user message",
    "post_llm_call": "sync_turn: once per completed turn",
    "on_session_end": "sync_turn, after post_llm_call: Hermes 0.19.0 fires it at the end of "
                      "every turn (run_conversation), not at a session's end",
    "on_session_finalize": "on_session_end: the session really ends (exit, /new, expiry)",
    "on_session_reset": "on_session_switch (reason new after /new, or reset)",
    "pre_tool_call": "around each tool call of a Hermes plugin or provider (the bridge runs "
                     "them); a block answers the call",
    "post_tool_call": "after each tool call of a Hermes plugin or provider",
    "transform_tool_result": "after each tool call of a Hermes plugin or provider: a string "
                             "replaces the result",
    "subagent_start": "on_message: a delegated child session's first user message (its task), "
                      "fired on the delegating session's side",
    "subagent_stop": "on_delegation: once per finished child, on the delegating session's side",
}

#: delivered only in part: hermes-core's own tools have no hook around their calls
PARTIAL: dict[str, str] = {
    name: "only around the tools of Hermes plugins; hermes-core's own tools (memory, "
          "session_search, MCP tools, ...) have no hook around their calls"
    for name in ("pre_tool_call", "post_tool_call", "transform_tool_result")}

#: Hermes hook -> why hermes-core has no counterpart (it is never called)
UNMAPPED: dict[str, str] = {
    "transform_terminal_output": "hermes-core has no terminal tool",
    "transform_llm_output": "no hermes-core hook may replace the reply text",
    "pre_api_request": "no hermes-core hook around each model call reaches a plugin other than "
                       "the context engine",
    "post_api_request": "no hermes-core hook around each model call reaches a plugin other than "
                        "the context engine",
    "api_request_error": "no hermes-core hook for a failed model call",
    "pre_verify": "hermes-core has no verification loop",
    "pre_gateway_dispatch": "hermes-core's platforms dispatch messages without a plugin hook",
    "pre_approval_request": "hermes-core has no approval gate",
    "post_approval_response": "hermes-core has no approval gate",
    "kanban_task_claimed": "hermes-core has no task board",
    "kanban_task_completed": "hermes-core has no task board",
    "kanban_task_blocked": "hermes-core has no task board",
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
class Registered:
    """The hooks, tools and commands one ``register(ctx)`` call registered."""

    hooks: dict[str, list[Callable[..., Any]]] = field(default_factory=dict)
    tools: list[RegisteredTool] = field(default_factory=list)
    #: commands with no hermes-core counterpart: ``/name`` (slash) or ``hermes name`` (CLI)
    commands: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.hooks or self.tools)

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
            value = call_with(callback, **_TELEMETRY, **kwargs)
            if inspect.isawaitable(value):
                value = _await(value)
        except Exception as exc:
            problem(f"its {hook} hook {getattr(callback, '__name__', '?')} raised "
                    f"{type(exc).__name__}: {exc}")
            continue
        if value is not None:
            answers.append(value)
    return answers


def _await(value: Any) -> Any:
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
    value = call_with(entry.handler, args, **kwargs)
    if entry.is_async or inspect.isawaitable(value):
        value = _await(value)
    return value


def guarded_call(peers: list[Callable[..., list[Any]]], tool: str, base: dict[str, Any],
                 run: Callable[[], str]) -> str:
    """Run one Hermes tool call (``run``) between the ``pre_tool_call``, ``post_tool_call`` and
    ``transform_tool_result`` hooks of every live bridged plugin (``peers``: each fires one of
    its hooks by name and keyword arguments, answering the list of answers), as Hermes' dispatch
    does: a block answers the call with ``{"error": message}`` and the tool does not run; the
    first string ``transform_tool_result`` answers replaces the result."""
    blocked = block_message([a for fire_hook in peers
                             for a in fire_hook("pre_tool_call", **base)], tool)
    start = time.perf_counter()
    if blocked is not None:
        text = json.dumps({"error": blocked}, ensure_ascii=False)
        for fire_hook in peers:
            fire_hook("post_tool_call", result=text, duration_ms=0, status="blocked",
                      error_type="blocked", error_message=blocked, **base)
        return text
    try:
        text = run()
    except Exception as exc:
        ms = int((time.perf_counter() - start) * 1000)
        error = json.dumps({"error": f"{type(exc).__name__}: {exc}"}, ensure_ascii=False)
        for fire_hook in peers:
            fire_hook("post_tool_call", result=error, duration_ms=ms, status="error",
                      error_type=type(exc).__name__, error_message=str(exc), **base)
        raise
    done = {"result": text, "duration_ms": int((time.perf_counter() - start) * 1000),
            "status": "ok", "error_type": None, "error_message": None}
    for fire_hook in peers:
        fire_hook("post_tool_call", **done, **base)
    for fire_hook in peers:
        answers = fire_hook("transform_tool_result", **done, **base)
        replaced = next((a for a in answers if isinstance(a, str)), None)
        if replaced is not None:
            return replaced
    return text


def result_text(value: Any) -> str:
    """A handler's answer as the text the model reads: text as it is, data as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
