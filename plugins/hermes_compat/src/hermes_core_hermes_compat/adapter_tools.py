"""The tools of one bridged memory provider (:mod:`.adapter_memory`), and Hermes' hooks around
every tool call.

A provider's own tools (``get_tool_schemas`` / ``handle_tool_call``) and the tools its
``register(ctx)`` registered (``ctx.register_tool``, and one read-only ``<plugin>_skill`` tool for
its ``ctx.register_skill`` skills) become hermes-core tools; each call runs on the session's
Hermes object's thread. Hermes' ``pre_tool_call`` / ``post_tool_call`` hooks of a bridged plugin
see every tool call hermes-core makes (the kernel's tool hooks), and its
``transform_tool_result`` hooks see the results of every bridged plugin's tools, as Hermes'
dispatch does.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar

from hermes_core import hookimpl
from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.toolrun import ToolOutcome
from hermes_core.types import Session, ToolCall, ToolContext

from .adapter_objects import ProviderObjects
from .convert import hermes_tools, tool_result
from .general import (
    Registered,
    available,
    block_message,
    fire,
    post_tool_fields,
    result_text,
    run_handler,
    skill_schema,
    skill_text,
    skill_tool_name,
    tool_schema,
    transformed,
)
from .host_access import in_tool_call
from .slots import Slot

__all__ = ["LIVE", "ProviderTools"]

#: the live bridged plugins that registered Hermes hooks, for the hooks Hermes fires around every
#: tool (``pre_tool_call`` of any Hermes plugin sees the tools of all of them)
LIVE: weakref.WeakSet[ProviderTools] = weakref.WeakSet()


class ProviderTools(ProviderObjects):
    """The tool part of :class:`~.adapter_memory.HermesMemoryProvider` (its base)."""

    name: ClassVar[str]
    general: bool

    @hookimpl
    def get_tools(self) -> list[Tool]:
        # a static description, asked on the caller's thread: the tools are offered even while
        # the object's own thread is held by a hung call
        with self._lock:
            first = next(iter(self._slots.values()), None)
        # (the first object loaded describes them when no slot is left: every conversation ended)
        obj = first.obj if first is not None else self._loaded.providers[0]
        tools = [] if self.general else hermes_tools(obj, self.name, self._problem,
                                                     self._call_tool, check=False)
        # a provider's own tool wins over a ctx.register_tool of the same name (mnemosyne-hermes
        # registers each of its provider's tools again): Hermes loads a provider's register(ctx)
        # with a register_tool that does nothing, and offers the provider's tools
        own = {tool.name for tool in tools}
        return tools + [t for t in self._registered_tools(self._hooks) if t.name not in own]

    def _registered_tools(self, registered: Registered) -> list[Tool]:
        """hermes-core tools for the plugin's ``ctx.register_tool`` calls whose ``check_fn``
        lets them be offered."""
        tools = []
        for entry in registered.tools:
            try:
                name, description, params = tool_schema(entry)
                if not available(entry):
                    self._problem(f"tool {entry.name!r} is not offered: its check_fn() is false")
                    continue
            except Exception as exc:  # a schema hermes-core cannot express, a check that raised
                self._problem(f"tool {entry.name!r} is not offered: {type(exc).__name__}: {exc}")
                continue

            def handle(args: Any, ctx: ToolContext, _name: str = name) -> str:
                return self._call_registered(_name, dict(args or {}), ctx)
            tools.append(Tool(name=name, description=description or f"{self.name} tool",
                              parameters=params, handler=handle))
        if registered.skills:
            tools.append(self._skill_tool(registered))
        return tools

    def _skill_tool(self, registered: Registered) -> Tool:
        """One read-only tool showing the plugin's ``ctx.register_skill`` skills by name (Hermes
        loads a plugin's skill only when asked: it is not in the system prompt either)."""
        name = skill_tool_name(self.candidate.plugin)
        spec = skill_schema(self.candidate.plugin, registered.skills)

        def show(args: Any, ctx: ToolContext) -> str:
            self._ran(f"tool {name}")
            try:
                return skill_text(registered.skills, str(dict(args or {}).get("name", "")))
            except (LookupError, OSError) as exc:
                raise ToolError(f"{self.name}: {exc}") from exc
        return Tool(name=name, description=spec["description"], parameters=spec["parameters"],
                    handler=show)

    def _tool_slot(self, tool: str, ctx: ToolContext) -> tuple[Slot, Session]:
        if ctx.session is None:
            raise ToolError(f"tool {tool!r} of {self.name} needs a session")
        slot = self._ready(ctx.session, move=False)
        if slot is None:
            failure = self._slot(ctx.session).failure
            raise ToolError(f"{self.name} is not available in this session: its initialize() "
                            f"failed ({failure.message if failure else 'unknown error'})")
        return slot, ctx.session

    def _call_tool(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> str:
        slot, session = self._tool_slot(tool, ctx)
        return self._guarded(session, tool, args, ctx, lambda: tool_result(
            self.name, tool, slot.call(in_tool_call, ctx, slot.pinned,
                                       slot.obj.handle_tool_call, tool, args), self._problem))

    def _call_registered(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> str:
        slot, session = self._tool_slot(tool, ctx)
        entry = next((e for e in self._hooks.tools if e.name == tool), None)
        if entry is None:
            raise ToolError(f"{self.name} has no tool {tool!r} in this session")
        self._ran(f"tool {tool}")
        return self._guarded(session, tool, args, ctx, lambda: result_text(slot.call(
            in_tool_call, ctx, slot.pinned, run_handler, entry, args, task_id=session.id,
            session_id=session.id)))

    def _tool_base(self, session: Session, tool: str, args: dict[str, Any], call_id: str
                   ) -> dict[str, Any] | None:
        """What Hermes passes to its tool hooks about one call (``None``: no slot this session)."""
        slot = self._ready(session, move=False)
        if slot is None:
            return None
        base = {"tool_name": tool, "args": args, "tool_call_id": call_id, "api_request_id": "",
                "middleware_trace": [], **self._turn(slot, session)}
        base.pop("model"), base.pop("platform")
        return base

    def _guarded(self, session: Session, tool: str, args: dict[str, Any], ctx: ToolContext,
                 run: Callable[[], str]) -> str:
        """Run a Hermes tool and hand its result to the ``transform_tool_result`` hooks of every
        live bridged plugin, as Hermes' dispatch does (``pre_tool_call`` and ``post_tool_call``
        come from the kernel's hooks around every call)."""
        text = run()
        peers = [p for p in list(LIVE) if p.context.home == self.context.home
                 and p._hooks.has("transform_tool_result")]
        base = self._tool_base(session, tool, args, ctx.tool_call_id or "") if peers else None
        if base is None:
            return text
        base["duration_ms"] = 0
        return transformed([functools.partial(p._fire, session) for p in peers], base, text)

    @hookimpl
    def on_pre_tool_call(self, call: ToolCall, session: Session | None, plugin: str
                         ) -> str | None:
        """Hermes' ``pre_tool_call`` before every tool call hermes-core makes: a ``block``
        (or ``approve``, which hermes-core has no gate for) answer blocks it."""
        if session is None or not self._hooks.has("pre_tool_call"):
            return None
        base = self._tool_base(session, call.name, dict(call.arguments), call.id)
        if base is None:
            return None
        # Hermes waits for a guard's answer, however long; the kernel's deadline would let the
        # call run unguarded once it passed. So a guard that has not answered within most of
        # the deadline blocks the call (as Hermes' approval gate does when it fails).
        slot = self._slot(session)
        self._ran("hook pre_tool_call")
        future = slot.pinned.submit(fire, self._hooks, "pre_tool_call", self._problem, **base)
        try:
            answers = future.result(timeout=self._guard_wait)
        except FutureTimeout:
            self._problem(f"its pre_tool_call did not answer within {self._guard_wait:.1f} s: "
                          "the call was blocked (raise hooks.timeouts.on_pre_tool_call for a "
                          "slow guard)")
            return (f"BLOCKED: the pre_tool_call check of Hermes plugin "
                    f"{self.candidate.plugin!r} did not answer in time")
        return block_message(answers, call.name)

    @hookimpl
    def on_post_tool_call(self, call: ToolCall, session: Session | None, outcome: ToolOutcome
                          ) -> None:
        """Hermes' ``post_tool_call`` after every tool call hermes-core made or blocked."""
        if session is None or not self._hooks.has("post_tool_call"):
            return
        base = self._tool_base(session, call.name, dict(call.arguments), call.id)
        if base is not None:
            self._fire(session, "post_tool_call", move=False, **base, **post_tool_fields(
                outcome.content, outcome.is_error, outcome.blocked_by is not None,
                outcome.seconds))
