"""Running the model's tool calls: routing, parallel batches, errors as results, the budget notes.

* **Routing.** Every call goes to the plugin that offered the tool (``register_tools`` or an
  instance's ``get_tools``). Two plugins offering one name is an error naming both, raised when the
  session's tool list is built; the kernel never picks one silently (Hermes let a provider tool
  named like a core tool hijack dispatch).
* **Parallel batches.** The calls of one response run concurrently, on at most
  :data:`MAX_PARALLEL` threads, only when every one is ``parallel_safe`` and no two touch
  overlapping paths (``path_arguments``: the same file, or a file inside a folder another call
  names). Otherwise they run one after the other, in the model's order. Results always come back
  in the model's order.
* **Errors are results.** An unknown tool, invalid arguments (``ToolCall.error``: a call the client
  could not read), :class:`~hermes_core.errors.ToolError`
  or any other exception becomes an error result the model reads (``is_error``); the loop goes on.
  Unexpected exceptions are logged with the plugin's name.
* **Budget.** :class:`IterationBudget` counts LLM calls per turn (``llm.max_iterations``, 90 by
  default). From 70 % of the budget a "wrap up" note, from 90 % a "respond now" note, is appended
  to the batch's last tool result: inside the conversation, never in the system prompt, so the
  prompt cache is untouched.
* **Guards.** A router built with the host's hooks (:meth:`ToolRouter.from_host`) calls
  ``on_pre_tool_call`` before each call of a known tool (a text answer blocks it: the model reads
  an error naming the plugin and its reason) and ``on_post_tool_call`` after it, each under its
  hook deadline; a failing or late implementation is logged and never fails the call.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ._lanes import run_bounded, run_here
from .errors import RegistryError, ToolError
from .fence import MAX_TOOL_RESULT_CHARS, shorten_result
from .turn import IterationBudget
from .types import ToolCall, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from .hooks import Hooks
    from .host import PluginHost
    from .kinds import Tool
    from .turn import TurnContext
    from .types import Session

__all__ = ["MAX_PARALLEL", "IterationBudget", "ToolOutcome", "ToolRouter", "paths_overlap"]

log = logging.getLogger("hermes_core.tools")

#: the most tool calls of one response that run at the same time
MAX_PARALLEL = 8


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(os.path.expanduser(path))))


def _paths(tool: Tool, arguments: dict[str, Any]) -> list[str]:
    out = []
    for name in tool.path_arguments:
        value = arguments.get(name)
        values = value if isinstance(value, list | tuple) else [value]
        out += [_norm(v) for v in values if isinstance(v, str) and v]
    return out


def paths_overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether any path of ``a`` equals, contains or lies inside a path of ``b`` (normalised)."""
    for p in a:
        for q in b:
            if p == q or q.startswith(p.rstrip(os.sep) + os.sep) or p.startswith(q.rstrip(os.sep) + os.sep):
                return True
    return False


class ToolRouter:
    """The session's tools by name, and how to run a response's calls."""

    def __init__(self, tools: dict[str, tuple[Tool, str]], *, timeout: float = 120.0,
                 result_chars: int = MAX_TOOL_RESULT_CHARS, hooks: Hooks | None = None) -> None:
        self.tools = dict(tools)
        #: the hooks called around each call (``on_pre_tool_call``, ``on_post_tool_call``)
        self.hooks = hooks
        #: the deadline of one call (``hooks.tool_timeout``); the model gets an error result after it
        self.timeout = timeout
        #: the longest result passed on (``hooks.tool_result_chars``)
        self.result_chars = result_chars
        # computed once per session: pydantic schema generation is slow, and a stable tool list
        # keeps the request prefix (and so the prompt cache) identical from call to call
        self._schemas = [tool.schema() for tool, _plugin in self.tools.values()]

    @classmethod
    def from_host(cls, host: PluginHost, allowed: Collection[str] | None = None) -> ToolRouter:
        """Every tool of the host's plugins (those in ``allowed`` when given; not those whose
        ``available(config)`` says no); :class:`RegistryError` naming both on a collision."""
        conflicts = host.registries.tools.conflicts
        if conflicts:
            name, owners = next(iter(conflicts.items()))
            raise RegistryError(
                f"tool {name!r} is registered by {' and '.join(repr(p) for p in owners)}; "
                f"disable all but one of them ('hermes-core plugins disable NAME')"
            )
        core = host.config.core
        tools = {name: entry for name, entry in host.tools().items()
                 if (allowed is None or name in allowed)
                 and (entry[0].available is None or entry[0].available(core))}
        return cls(tools, timeout=core.hooks.tool_timeout, result_chars=core.hooks.tool_result_chars,
                   hooks=host.hooks)

    def schemas(self) -> list[dict[str, Any]]:
        """The provider-neutral tool schemas to send with each request."""
        return list(self._schemas)

    def names(self) -> list[str]:
        return list(self.tools)

    def parallel_batch(self, calls: Sequence[ToolCall]) -> bool:
        """Whether ``calls`` may run concurrently (see the module docstring)."""
        if len(calls) < 2:
            return False
        seen: list[list[str]] = []
        for call in calls:
            entry = self.tools.get(call.name)
            if entry is None or not entry[0].parallel_safe:
                return False
            paths = _paths(entry[0], call.arguments)
            if any(paths_overlap(paths, other) for other in seen):
                return False
            seen.append(paths)
        return True

    def run(self, calls: Sequence[ToolCall], session: Session | None,
            turn: TurnContext | None = None) -> list[ToolOutcome]:
        """Run ``calls`` (parallel when allowed); one outcome per call, in the model's order.
        ``turn`` is handed to each tool (``ToolContext.turn``)."""
        if self.parallel_batch(calls):
            with ThreadPoolExecutor(
                max_workers=min(MAX_PARALLEL, len(calls)), thread_name_prefix="hermes-tool"
            ) as pool:
                outcomes = list(pool.map(
                    lambda c: self.run_one(c, session, parallel=True, turn=turn), calls))
            return outcomes
        return [self.run_one(call, session, turn=turn) for call in calls]

    def run_one(self, call: ToolCall, session: Session | None, *, parallel: bool = False,
                turn: TurnContext | None = None, here: bool = False) -> ToolOutcome:
        """Run one call; never raises for the tool's fault. A call past its deadline has its
        token (``ToolContext.turn.cancel``) cancelled, so work it started can stop. With
        ``here`` the tool runs on this thread and the caller bounds it (no thread per call)."""
        entry = self.tools.get(call.name)
        if entry is None:
            available = ", ".join(sorted(self.tools)) or "none"
            return ToolOutcome(
                call, None, f"Error: there is no tool named {call.name!r}. Available tools: {available}.",
                is_error=True,
            )
        tool, plugin = entry
        blocked = None if call.error is not None else self._blocked(call, session, plugin)
        if call.error is not None:  # the client could not read the call: tell the model why
            outcome = ToolOutcome(call, plugin, f"Error: {call.error}", is_error=True)
        elif blocked is not None:
            by, reason = blocked
            outcome = ToolOutcome(call, plugin, f"Error: the plugin {by!r} blocked this call of "
                                  f"{call.name!r}: {reason}", True, 0.0, parallel, blocked_by=by)
        else:
            outcome = self._invoke(tool, plugin, call, session, parallel, turn, here)
        if self.hooks is not None:
            self.hooks.on_post_tool_call(call=call, session=session, outcome=outcome)
        return outcome

    def _blocked(self, call: ToolCall, session: Session | None, plugin: str
                 ) -> tuple[str, str] | None:
        """(plugin, reason) of the first ``on_pre_tool_call`` answer that blocks the call."""
        if self.hooks is None:
            return None
        for answer in self.hooks.on_pre_tool_call(call=call, session=session, plugin=plugin):
            if answer.ok and isinstance(answer.value, str) and answer.value.strip():
                return answer.plugin.partition(":")[2] or answer.plugin, answer.value.strip()
        return None

    def _invoke(self, tool: Tool, plugin: str, call: ToolCall, session: Session | None,
                parallel: bool, turn: TurnContext | None, here: bool) -> ToolOutcome:
        start = time.perf_counter()
        if turn is not None:  # a token of its own, cancelled with the turn or at the deadline
            turn = dataclasses.replace(turn, cancel=turn.cancel.child())
        context = ToolContext(session=session, tool_call_id=call.id, plugin_name=plugin, turn=turn)
        invoke = lambda: tool.invoke(call.arguments, context)  # noqa: E731
        result = run_here(invoke) if here else run_bounded(invoke, self.timeout,
                                                           name=f"hermes-tool-{call.name}")
        exc = result.error
        if result.status == "ok":
            content, is_error = result.value, False
        elif result.status == "timed_out":
            if turn is not None:
                turn.cancel.cancel(f"the call passed its {self.timeout:g} s deadline")
            log.error("plugin %s: tool %s did not finish within %g s (hooks.tool_timeout); the turn "
                      "went on without its result", plugin, call.name, self.timeout)
            content = (f"Error: tool {call.name!r} did not finish within {self.timeout:g} s and was "
                       "abandoned; it may still complete in the background. Do not assume it ran.")
            is_error = True
        elif isinstance(exc, ToolError):
            content, is_error = f"Error: {exc}", True
        else:
            log.error(
                "plugin %s: tool %s raised %s: %s", plugin, call.name, type(exc).__name__, exc,
                exc_info=exc if log.isEnabledFor(logging.DEBUG) else None,
            )
            content = f"Error: tool {call.name!r} failed: {type(exc).__name__}: {exc}"
            is_error = True
        # one answer (a huge file, a runaway error text) must not fill the model's context
        content = shorten_result(content, limit=self.result_chars, source=f"{call.name!r} tool")
        return ToolOutcome(call, plugin, content, is_error, time.perf_counter() - start, parallel)
