"""The one way the kernel calls a hook: :class:`Hooks`, one typed method per hookspec.

``host.hooks.on_message(message=m, session=s)`` reads like the spec it calls, mypy checks it, and a
reader can follow a turn from :mod:`hermes_core.agent` into the plugins. Every method runs through
:class:`~hermes_core._hookcall.HookCallEngine`, so every call has pluggy's semantics (order,
``firstresult``, wrappers, monitoring) plus the kernel's: kind scoping, isolation, a deadline, and
tracing. What each hook's receivers, deadline and expected return are is written once, below.

Results: a plain hook returns one :class:`HookOutcome` per implementation that ran, in call order
(``outcome.value`` is ``None`` unless ``outcome.ok``); a ``firstresult`` hook returns the first
answer or ``None``. Problems (raised, late, wrong type) are also kept on :attr:`Hooks.problems` and
passed to :meth:`Hooks.subscribe` listeners.

Two call forms: ``host.hooks.X(...)`` waits, each implementation under the hook's deadline;
``host.hooks.later.X(...)`` (:class:`Later`: ``sync_turn``, ``on_turn_cancelled``,
``queue_prefetch`` and the session boundaries) queues each implementation on its plugin's lane
for the conversation and returns at once; the conversation's
:class:`~hermes_core._lanes.Backlog` flushes and drains what is queued.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from ._backlog import Backlog, TaskKind, expand_all
from ._hookcall import Check, HookCallEngine, HookOutcome, HookProblem, Later, OutcomeStatus
from ._lanes import LaneSet
from .types import CompressionResult, Message, Session

if TYPE_CHECKING:
    from collections import deque
    from pathlib import Path

    from .agent import Agent
    from .config import LoadedConfig
    from .kinds import Tool
    from .results import CurationReport, TurnResult
    from .storage.transfer import CopyProgress, StorageSide
    from .types import Dispatcher, EndReason, MemoryWrite, SwitchReason, ToolCall, ToolOutcome, Usage

__all__ = [
    "CONTEXT_PLAN_KEYS",
    "ENGINE",
    "MEMORY",
    "MODULE",
    "PLATFORM",
    "HookOutcome",
    "HookProblem",
    "Hooks",
    "LaterHooks",
    "OutcomeStatus",
    "values",
]

#: the kinds of plugin object the kernel registers (an instance's kind is fixed at activation)
MEMORY = "memory-provider"
ENGINE = "context-engine"
PLATFORM = "platform"
MODULE = "module"

_MEMORY = frozenset({MEMORY})
_ENGINE = frozenset({ENGINE})
_PLATFORM = frozenset({PLATFORM})
_MODULE = frozenset({MODULE})
_LIFECYCLE = frozenset({MEMORY, ENGINE})
_INSTANCES = frozenset({MEMORY, ENGINE, PLATFORM})
_ANY = frozenset({MEMORY, ENGINE, PLATFORM, MODULE})
#: forget reaches what providers and the engine keep, and what plugin modules keep themselves
_FORGET = frozenset({MEMORY, ENGINE, MODULE})
#: the hooks around each tool call reach the same: any plugin may guard or watch tool calls
_TOOL_CALLS = _FORGET

#: lanes: "turn" for the hooks on a turn's path, "background" for the worker's hooks
TURN = "turn"
BACKGROUND = "background"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"return a str or None, not {type(value).__name__}"


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"return True, False or None, not {type(value).__name__}"


def _class(module: str, name: str) -> Callable[[], type]:
    """``name`` of the kernel module ``module``, imported on first use (the kinds, the doctor
    and the result modules stay out of this module's imports)."""
    @functools.cache
    def load() -> type:
        cls: type = getattr(importlib.import_module(module, __package__), name)
        return cls

    return load


def _list_of(label: str, load: Callable[[], type]) -> Callable[[Any], str | None]:
    """The check of an answer that must be a list of ``load()`` instances."""
    def check(value: Any) -> str | None:
        cls = load()
        if not isinstance(value, list | tuple):
            return f"return a list of {label}, not {type(value).__name__}"
        for item in value:
            if not isinstance(item, cls):
                return f"return a list of {label}; it held a {type(item).__name__}"
        return None

    return check


def _one_of(label: str, load: Callable[[], type]) -> Callable[[Any], str | None]:
    """The check of an answer that must be a ``load()`` instance (or ``None``, never checked)."""
    def check(value: Any) -> str | None:
        return None if isinstance(value, load()) else (
            f"return a {label} or None, not {type(value).__name__}")

    return check


_tools = _list_of("hermes_core.Tool", _class(".kinds", "Tool"))
_doctor_checks = _list_of("hermes_core.doctor.DoctorCheck", _class(".doctor", "DoctorCheck"))
_forget_report = _one_of("hermes_core.ForgetReport", _class(".types", "ForgetReport"))
_curation_report = _one_of("hermes_core.results.CurationReport",
                           _class(".results", "CurationReport"))
_turn_end_note = _one_of("hermes_core.results.TurnEndNote", _class(".results", "TurnEndNote"))
_copy_report = _one_of("hermes_core.storage.transfer.CopyReport",
                       _class(".storage.transfer", "CopyReport"))


def _compression(value: Any) -> str | None:
    if (isinstance(value, CompressionResult) and isinstance(value.messages, list)
            and all(isinstance(m, Message) for m in value.messages)):
        return None
    return ("return a CompressionResult whose messages are a list of Message (the history was "
            f"kept as it was), not {type(value).__name__}")


def _loaded(value: Any) -> str | None:
    if (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], Session)
            and isinstance(value[1], list) and all(isinstance(m, Message) for m in value[1])):
        return None
    return f"return (Session, list[Message]) or None, not {type(value).__name__}"


#: the keys every ``describe_context`` answer carries, and their types
CONTEXT_PLAN_KEYS: dict[str, type | tuple[type, ...]] = {
    "engine": str, "messages": int, "tokens": int, "context_window": int,
    "threshold_tokens": int, "over_threshold": bool, "lines": list,
}


def _context_plan(value: Any) -> str | None:
    import json

    if not isinstance(value, dict):
        return f"return a dict describing the plan, or None, not {type(value).__name__}"
    missing = [k for k in CONTEXT_PLAN_KEYS if k not in value]
    if missing:
        return f"the plan lacks the required key(s) {', '.join(missing)}"
    wrong = [f"{k} ({type(value[k]).__name__}, not {getattr(t, '__name__', t)})"
             for k, t in CONTEXT_PLAN_KEYS.items() if not isinstance(value[k], t)]
    if wrong or not all(isinstance(line, str) for line in value["lines"]):
        return f"the plan has keys of the wrong type: {', '.join(wrong) or 'lines (a list of str)'}"
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        return f"the plan is not JSON-serialisable: {exc}"
    return None


def _nothing(value: Any) -> str | None:
    return f"return None (the kernel ignores the value), not {type(value).__name__}"


def _registers(value: Any) -> str | None:
    return (f"returned a {type(value).__name__}, which the kernel ignores: call register(...) "
            "with each object it offers instead (the hook returns nothing)")


#: which kinds receive each hook: the one table the kernel and the plugin checks share
RECEIVERS: dict[str, frozenset[str]] = {
    "register_memory_providers": _MODULE,
    "register_context_engines": _MODULE,
    "register_tools": _MODULE,
    "register_platforms": _MODULE,
    "register_commands": _MODULE,
    "register_embedders": _MODULE,
    "register_llm_clients": _MODULE,
    "system_prompt_block": _MEMORY,
    "prefetch": _MEMORY,
    "queue_prefetch": _MEMORY,
    "on_message": _MEMORY,
    "sync_turn": _MEMORY,
    "on_turn_cancelled": _MEMORY,
    "on_pre_compress": _MEMORY,
    "on_memory_write": _MEMORY,
    "on_delegation": _MEMORY,
    "load_session": _MEMORY,
    "on_session_switch": _LIFECYCLE,
    "on_session_end": _LIFECYCLE,
    "shutdown": _INSTANCES,
    "get_tools": _LIFECYCLE,
    "on_post_compress": _ANY,
    "should_compress": _ENGINE,
    "compress": _ENGINE,
    "update_from_response": _ENGINE,
    "describe_context": _ENGINE,
    "on_turn_start": _ENGINE,
    "on_prompt_assembled": _ENGINE,
    "forget": _FORGET,
    "on_erasure": _LIFECYCLE,
    "connect": _PLATFORM,
    "disconnect": _PLATFORM,
    "send": _PLATFORM,
    "doctor_checks": _MODULE,
    "copy_storage": _MODULE,
    "import_sessions": _MODULE,
    "on_pre_tool_call": _TOOL_CALLS,
    "on_post_tool_call": _TOOL_CALLS,
    "on_turn_begin": _MODULE,
    "tool_batch_note": _MODULE,
    "pre_compaction_flush": _MODULE,
    "on_turn_end": _MODULE,
    "on_agent_reset": _MODULE,
    "on_agent_close": _MODULE,
}


def values(outcomes: Sequence[HookOutcome]) -> list[Any]:
    """The answers of the implementations that answered, in call order."""
    return [o.value for o in outcomes if o.status == "ok" and o.value is not None]


class Hooks:
    """The typed facade over one plugin manager's hooks (``host.hooks``)."""

    def __init__(self, pm: pluggy.PluginManager, *, kind_of: Callable[[str], str],
                 timeout_of: Callable[[str], float]) -> None:
        self._relay = pm.hook
        self.engine = HookCallEngine(pm, kind_of=kind_of, timeout_of=timeout_of, lanes=LaneSet())
        #: the queued form of the background hooks (see the module doc)
        self.later = LaterHooks(self)

    # -------------------------------------------------------------------------------- plumbing

    def _all(self, caller: pluggy.HookCaller, lane: str | None, check: Check | None, *,
             only: str | None = None, exclude: str | None = None, **kwargs: Any
             ) -> list[HookOutcome]:
        _result, outcomes = self.engine.call(caller, kwargs, receivers=RECEIVERS[caller.name],
                                             lane=lane, check=check, only=only, exclude=exclude)
        return outcomes

    def _first(self, caller: pluggy.HookCaller, lane: str | None, check: Check | None,
               **kwargs: Any) -> Any:
        result, _outcomes = self.engine.call(caller, kwargs, receivers=RECEIVERS[caller.name],
                                             lane=lane, check=check)
        return result

    @property
    def problems(self) -> deque[HookProblem]:
        """The most recent problems (bounded), oldest first."""
        return self.engine.problems

    @property
    def problem_count(self) -> int:
        """How many problems were recorded since the host was built."""
        return self.engine.problem_count

    def subscribe(self, listener: Callable[[HookProblem], None]) -> Callable[[], None]:
        """Receive every later problem; returns the function that unsubscribes."""
        return self.engine.subscribe(listener)

    def report_late(self, caller: pluggy.HookCaller, plugin: str, *, queued: bool, deadline: float,
                    setting: str, **kwargs: Any) -> None:
        """Report a plugin that a caller with its own deadline went on without (see
        :meth:`HookCallEngine.report_late`): logged and kept like every other late hook."""
        self.engine.report_late(caller.name, plugin, queued=queued, deadline=deadline,
                                setting=setting, kwargs=kwargs)

    def current_plugin(self) -> str | None:
        """The plugin whose implementation is running on this thread (for registry callbacks)."""
        return self.engine.current_plugin()

    def implemented(self, caller: pluggy.HookCaller, *, only: str | None = None) -> list[str]:
        """Names of the plugins of the receiving kinds that implement a hook, in call order."""
        receivers = RECEIVERS[caller.name]
        kind_of = self.engine._kind_of
        names = [impl.plugin_name for impl in reversed(caller.get_hookimpls())
                 if kind_of(impl.plugin_name) in receivers and not (impl.wrapper or impl.hookwrapper)]
        return [n for n in names if only is None or n == only]

    def drain(self, timeout: float) -> list[str]:
        """Wait for late calls still on the plugins' lanes (queued calls first reach theirs);
        return the lanes still busy."""
        deadline = time.monotonic() + timeout
        expand_all(timeout)
        return self.engine.lanes.drain(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self.later.backlog.drain(0)  # the lanes were drained before: nothing is left to wait for
        self.engine.lanes.close()

    # ---------------------------------------------------------------------------- registries

    def register_memory_providers(self, *, register: Callable[[type], None], only: str | None = None
                     ) -> list[HookOutcome]:
        return self._all(self._relay.register_memory_providers, None, _registers, only=only,
                         register=register)

    def register_context_engines(self, *, register: Callable[[type], None], only: str | None = None
                     ) -> list[HookOutcome]:
        return self._all(self._relay.register_context_engines, None, _registers, only=only, register=register)

    def register_tools(self, *, register: Callable[[Tool], None], only: str | None = None
                     ) -> list[HookOutcome]:
        return self._all(self._relay.register_tools, None, _registers, only=only, register=register)

    def register_platforms(self, *, register: Callable[[type], None], only: str | None = None
                     ) -> list[HookOutcome]:
        return self._all(self._relay.register_platforms, None, _registers, only=only, register=register)

    def register_embedders(self, *, register: Callable[[type], None], only: str | None = None
                           ) -> list[HookOutcome]:
        return self._all(self._relay.register_embedders, None, _registers, only=only, register=register)

    def register_llm_clients(self, *, register: Callable[[type], None], only: str | None = None
                             ) -> list[HookOutcome]:
        return self._all(self._relay.register_llm_clients, None, _registers, only=only,
                         register=register)

    def register_commands(self, *, register: Callable[[Any], None], only: str | None = None
                          ) -> list[HookOutcome]:
        return self._all(self._relay.register_commands, None, _registers, only=only, register=register)

    # ------------------------------------------------------------------------ memory lifecycle

    def system_prompt_block(self, *, session: Session) -> list[HookOutcome]:
        return self._all(self._relay.system_prompt_block, TURN, _text, session=session)

    def prefetch(self, *, query: str, session: Session, only: str | None = None) -> list[HookOutcome]:
        """Run inline: the prefetch runner calls it on each provider's own lane, under its deadline."""
        return self._all(self._relay.prefetch, None, _text, only=only, query=query, session=session)

    def queue_prefetch(self, *, query: str, session: Session) -> list[HookOutcome]:
        return self._all(self._relay.queue_prefetch, BACKGROUND, _nothing, query=query,
                         session=session)

    def on_message(self, *, message: Message, session: Session) -> list[HookOutcome]:
        return self._all(self._relay.on_message, TURN, _nothing, message=message, session=session)

    def sync_turn(self, *, user_message: Message, assistant_message: Message, session: Session,
                  messages: list[Message]) -> list[HookOutcome]:
        return self._all(self._relay.sync_turn, BACKGROUND, _nothing, user_message=user_message,
                         assistant_message=assistant_message, session=session, messages=messages)

    def on_turn_cancelled(self, *, user_message: Message, session: Session,
                          messages: list[Message]) -> list[HookOutcome]:
        return self._all(self._relay.on_turn_cancelled, BACKGROUND, _nothing,
                         user_message=user_message, session=session, messages=messages)

    def on_pre_compress(self, *, messages: list[Message], session: Session) -> list[HookOutcome]:
        return self._all(self._relay.on_pre_compress, TURN, _text, messages=messages,
                         session=session)

    def on_session_switch(self, *, new_session: Session, old_session: Session | None,
                          reason: SwitchReason) -> list[HookOutcome]:
        return self._all(self._relay.on_session_switch, BACKGROUND, _nothing,
                         new_session=new_session, old_session=old_session, reason=reason)

    def on_session_end(self, *, session: Session, messages: list[Message], reason: EndReason
                       ) -> list[HookOutcome]:
        return self._all(self._relay.on_session_end, BACKGROUND, _nothing, session=session,
                         messages=messages, reason=reason)

    def on_memory_write(self, *, write: MemoryWrite, exclude: str | None = None
                        ) -> list[HookOutcome]:
        """Every provider but ``exclude`` (the plugin-manager name of the one that wrote)."""
        return self._all(self._relay.on_memory_write, BACKGROUND, _nothing, exclude=exclude,
                         write=write)

    def on_delegation(self, *, task: str, result: str, child_session_id: str, status: str,
                      session: Session) -> list[HookOutcome]:
        return self._all(self._relay.on_delegation, TURN, _nothing, task=task, result=result,
                         child_session_id=child_session_id, status=status, session=session)

    def shutdown(self, *, only: str) -> list[HookOutcome]:
        """One instance at a time: the host calls them in reverse activation order."""
        return self._all(self._relay.shutdown, BACKGROUND, _nothing, only=only)

    def load_session(self, *, platform: str, conversation_key: str | None, session_id: str | None
                     ) -> tuple[tuple[Session, list[Message]] | None, list[HookOutcome]]:
        """The first answer, and the outcomes up to it: a caller must not start afresh when an
        implementation failed before answering (that would fork the stored conversation)."""
        result, outcomes = self.engine.call(
            self._relay.load_session, {"platform": platform, "conversation_key": conversation_key,
                                       "session_id": session_id},
            receivers=RECEIVERS["load_session"], lane=TURN, check=_loaded)
        return result, outcomes

    def forget(self, *, subject: str, scope: str, dry_run: bool) -> list[HookOutcome]:
        """Every provider and the engine; each answers a ForgetReport (see the spec)."""
        return self._all(self._relay.forget, TURN, _forget_report, subject=subject, scope=scope,
                         dry_run=dry_run)

    # ------------------------------------------------------------------------------------ tools

    def on_erasure(self, *, generation: int) -> list[HookOutcome]:
        return self._all(self._relay.on_erasure, TURN, _nothing, generation=generation)

    def get_tools(self) -> list[HookOutcome]:
        return self._all(self._relay.get_tools, TURN, _tools)

    def on_post_compress(self, *, messages: list[Message], session: Session) -> list[HookOutcome]:
        return self._all(self._relay.on_post_compress, TURN, _text, messages=messages,
                         session=session)

    def on_pre_tool_call(self, *, call: ToolCall, session: Session | None, plugin: str
                         ) -> list[HookOutcome]:
        """Every implementation, in call order; a non-empty text answer is a reason to block."""
        return self._all(self._relay.on_pre_tool_call, TURN, _text, call=call, session=session,
                         plugin=plugin)

    def on_post_tool_call(self, *, call: ToolCall, session: Session | None, outcome: ToolOutcome
                          ) -> list[HookOutcome]:
        return self._all(self._relay.on_post_tool_call, TURN, _nothing, call=call,
                         session=session, outcome=outcome)

    # ---------------------------------------------------------------------------- the engine

    def should_compress(self, *, messages: list[Message], prompt_tokens: int | None,
                        session: Session | None) -> bool | None:
        result: bool | None = self._first(self._relay.should_compress, TURN, _bool,
                                          messages=messages, prompt_tokens=prompt_tokens,
                                          session=session)
        return result

    def compress(self, *, messages: list[Message], focus_topic: str | None, memory_context: str,
                 session: Session | None) -> CompressionResult | None:
        result: CompressionResult | None = self._first(
            self._relay.compress, TURN, _compression, messages=messages, focus_topic=focus_topic,
            memory_context=memory_context, session=session)
        return result

    def update_from_response(self, *, usage: Usage) -> list[HookOutcome]:
        return self._all(self._relay.update_from_response, TURN, _nothing, usage=usage)

    def on_turn_start(self, *, session: Session) -> list[HookOutcome]:
        return self._all(self._relay.on_turn_start, TURN, _nothing, session=session)

    def on_prompt_assembled(self, *, session: Session, overhead_tokens: int) -> list[HookOutcome]:
        return self._all(self._relay.on_prompt_assembled, TURN, _nothing, session=session,
                         overhead_tokens=overhead_tokens)

    def describe_context(self, *, messages: list[Message], session: Session | None
                         ) -> dict[str, Any] | None:
        """The engine's plan for ``messages`` (see the spec); checked for the required keys."""
        result: dict[str, Any] | None = self._first(self._relay.describe_context, TURN,
                                                    _context_plan, messages=messages,
                                                    session=session)
        return result

    # ------------------------------------------------------------------------------ platforms

    def connect(self, *, dispatcher: Dispatcher, only: str | None = None) -> list[HookOutcome]:
        return self._all(self._relay.connect, TURN, _nothing, only=only, dispatcher=dispatcher)

    def disconnect(self, *, only: str | None = None) -> list[HookOutcome]:
        return self._all(self._relay.disconnect, TURN, _nothing, only=only)

    def send(self, *, conversation_key: str, text: str, only: str | None = None
             ) -> list[HookOutcome]:
        return self._all(self._relay.send, TURN, None, only=only,
                         conversation_key=conversation_key, text=text)

    # ------------------------------------------------------------------ a plugin's own stores

    def doctor_checks(self, *, home: Path, config: LoadedConfig) -> list[HookOutcome]:
        """Every loaded plugin module's checks, each under the hook's deadline (``doctor``)."""
        return self._all(self._relay.doctor_checks, TURN, _doctor_checks, home=home, config=config)

    def copy_storage(self, *, source: StorageSide, target: StorageSide, progress: CopyProgress
                     ) -> list[HookOutcome]:
        """Every loaded plugin module copies its stores, one after the other, on the caller's
        thread and without a deadline (a migration takes as long as the data needs)."""
        return self._all(self._relay.copy_storage, None, _copy_report, source=source,
                         target=target, progress=progress)

    def import_sessions(self, *, target: StorageSide, path: Path, dry_run: bool,
                        progress: CopyProgress) -> list[HookOutcome]:
        """Every loaded plugin module that keeps a session archive imports the sessions of
        ``path`` (the export format), on the caller's thread and without a deadline."""
        return self._all(self._relay.import_sessions, None, _copy_report, target=target,
                         path=path, dry_run=dry_run, progress=progress)

    # ------------------ the agent's own points (plugin modules; on their lanes, under deadlines)

    def on_turn_begin(self, *, agent: Agent) -> list[HookOutcome]:
        return self._all(self._relay.on_turn_begin, TURN, _nothing, agent=agent)

    def tool_batch_note(self, *, agent: Agent, calls: list[ToolCall]) -> list[str]:
        """The notes for a tool batch's last result, in call order."""
        return [o.value for o in self._all(self._relay.tool_batch_note, TURN, _text, agent=agent,
                                           calls=calls) if o.ok and o.value]

    def pre_compaction_flush(self, *, agent: Agent, messages: list[Message]) -> CurationReport | None:
        report: CurationReport | None = self._first(
            self._relay.pre_compaction_flush, TURN, _curation_report, agent=agent, messages=messages)
        return report

    def on_turn_end(self, *, agent: Agent, result: TurnResult) -> list[HookOutcome]:
        """Every implementation's :class:`~hermes_core.results.TurnEndNote` that came in time is
        merged into ``result`` here, in call order (a late one's is dropped)."""
        outcomes = self._all(self._relay.on_turn_end, TURN, _turn_end_note, agent=agent,
                             result=result)
        for note in (o.value for o in outcomes if o.ok and o.value is not None):
            result.notices += note.notices
            result.review_started = result.review_started or note.review_started
        return outcomes

    def on_agent_reset(self, *, agent: Agent) -> list[HookOutcome]:
        return self._all(self._relay.on_agent_reset, TURN, _nothing, agent=agent)

    def on_agent_close(self, *, agent: Agent) -> list[HookOutcome]:
        return self._all(self._relay.on_agent_close, TURN, _nothing, agent=agent)


class LaterHooks:
    """``host.hooks.later``: the background hooks, queued on each plugin's lane, never awaited.

    Each method takes the hook's arguments and ``backlog``: the conversation's
    :class:`~hermes_core._lanes.Backlog` that counts the call and picks the lane shard (by
    default one shared backlog, the shard then follows the session). A call no plugin implements
    queues nothing.
    """

    def __init__(self, hooks: Hooks) -> None:
        self._engine = hooks.engine
        self._relay = hooks._relay
        #: where calls without a backlog of their own are counted
        self.backlog = Backlog()

    def _queue(self, caller: pluggy.HookCaller, kind: TaskKind, label: str,
               backlog: Backlog | None, **kwargs: Any) -> None:
        self._engine.call(caller, kwargs, receivers=RECEIVERS[caller.name], lane=BACKGROUND,
                          check=_nothing, later=Later(backlog or self.backlog, label, kind))

    def sync_turn(self, *, user_message: Message, assistant_message: Message, session: Session,
                  messages: list[Message], backlog: Backlog | None = None) -> None:
        turn = sum(1 for m in messages if m.role == "user")
        self._queue(self._relay.sync_turn, "write", f"sync_turn {session.id} turn {turn}",
                    backlog, user_message=user_message, assistant_message=assistant_message,
                    session=session, messages=messages)

    def on_turn_cancelled(self, *, user_message: Message, session: Session,
                          messages: list[Message], backlog: Backlog | None = None) -> None:
        turn = sum(1 for m in messages if m.role == "user")
        self._queue(self._relay.on_turn_cancelled, "write",
                    f"on_turn_cancelled {session.id} turn {turn}", backlog,
                    user_message=user_message, session=session, messages=messages)

    def queue_prefetch(self, *, query: str, session: Session, backlog: Backlog | None = None
                       ) -> None:
        self._queue(self._relay.queue_prefetch, "prefetch", f"queue_prefetch {session.id}",
                    backlog, query=query, session=session)

    def on_session_switch(self, *, new_session: Session, old_session: Session | None,
                          reason: SwitchReason, backlog: Backlog | None = None) -> None:
        old = old_session.id if old_session is not None else None
        self._queue(self._relay.on_session_switch, "boundary",
                    f"on_session_switch {old} -> {new_session.id} ({reason})", backlog,
                    new_session=new_session, old_session=old_session, reason=reason)

    def on_session_end(self, *, session: Session, messages: list[Message], reason: EndReason,
                       backlog: Backlog | None = None) -> None:
        self._queue(self._relay.on_session_end, "boundary", f"on_session_end {session.id} ({reason})",
                    backlog, session=session, messages=messages, reason=reason)
