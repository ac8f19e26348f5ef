"""A Hermes memory provider as a hermes-core memory provider (``hermes-<name>``).

:func:`memory_class` builds, for one discovered plugin, a :class:`~hermes_core.MemoryProvider`
subclass; the plugin is imported only when the kernel instantiates that class (the provider is
selected in ``memory.providers``, or ``config validate`` / ``doctor`` build it). Every Hermes
method is called from one of the instance's hook implementations, so the kernel's deadlines,
isolation and problem reports apply to it like to any provider.

The mapping (hermes-core hook -> Hermes method):

* any hook of a session not seen yet -> ``initialize(session_id, hermes_home=..., platform=...,
  agent_context=..., user_id=..., parent_session_id=...)`` once, lazily; under
  ``memory.scope: user`` one Hermes provider object per user key, each in its own home; a
  delegated child session (``agent_context`` ``"subagent"``) gets an object of its own, shut down
  when the child ends (see :mod:`.delegation`);
* ``system_prompt_block`` -> ``system_prompt_block()``; ``prefetch`` -> ``prefetch(query,
  session_id=)`` (the object's first one waited for only part of the deadline: a provider still
  loading is "warming", see :meth:`HermesMemoryProvider.prefetch`); ``queue_prefetch`` ->
  ``queue_prefetch(query, session_id=)``;
* ``on_message`` (user message) -> ``on_turn_start(turn_number, text)``;
* ``sync_turn`` -> ``sync_turn(user, assistant, session_id=, messages=)`` (``messages`` only when
  the plugin's signature takes it);
* ``on_session_switch`` -> ``on_session_switch(new_id, parent_session_id=, reset=)`` when the
  plugin overrides it, else ``initialize`` again with the new id;
* ``on_session_end`` -> ``on_session_end(messages)``; ``on_pre_compress`` ->
  ``on_pre_compress(messages)``; ``on_memory_write`` -> ``on_memory_write(action, target,
  content, metadata)`` with Hermes' metadata keys (:func:`write_metadata`); ``on_delegation``
  -> ``on_delegation(task, result, child_session_id=)`` and ``subagent_stop``; ``get_tools`` ->
  ``get_tool_schemas()``, each call -> ``handle_tool_call(name, args)``; ``shutdown`` ->
  ``shutdown()`` on every object.

Every call into one Hermes object runs on that object's own thread (:class:`.calls.Pinned`):
Hermes calls a provider from one thread, and providers rely on it. Only the static descriptions
(``is_available``, ``get_config_schema``, ``get_tool_schemas``) are asked on the caller's thread.

An ``initialize`` that raises marks the object failed for that session: the failure is reported
once (``plugins list`` warnings, ``doctor`` of the running host) and the object's hooks do
nothing until a later session, or until :data:`RETRY_SECONDS` (doubling after each failure, up to
:data:`RETRY_MAX_SECONDS`) have passed; its tools answer with the reason meanwhile.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar

from hermes_core import hookimpl
from hermes_core.errors import PluginError, ToolError
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.toolrun import ToolOutcome
from hermes_core.types import (
    EndReason,
    MemoryWrite,
    Message,
    Session,
    SwitchReason,
    ToolCall,
    ToolContext,
)

from . import calls, status
from .convert import accepts, call_with, hermes_tools, to_openai, tool_result, write_metadata
from .delegation import delegated_result, start_kwargs, stop_kwargs
from .discovery import HermesCandidate
from .general import (
    HooksOnly,
    Registered,
    available,
    block_message,
    fire,
    injected_context,
    post_tool_fields,
    result_text,
    run_handler,
    skill_schema,
    skill_text,
    skill_tool_name,
    tool_schema,
    transformed,
    unmapped_hooks,
)
from .loading import HermesLoadError, Loaded, load
from .settings import HermesSection, check_section
from .slots import RETRY_MAX_SECONDS, RETRY_SECONDS, Failure, Slot

__all__ = ["RETRY_MAX_SECONDS", "RETRY_SECONDS", "WARM_SHARE", "HermesMemoryProvider",
           "memory_class", "overrides", "write_metadata"]

log = logging.getLogger(__name__)

#: the live bridged plugins, for the hooks Hermes fires around every tool (``pre_tool_call``
#: of any Hermes plugin sees the tools of all of them)
_LIVE: weakref.WeakSet[HermesMemoryProvider] = weakref.WeakSet()

#: the share of ``memory.prefetch_timeout`` a turn waits for a provider's first (cold) prefetch
WARM_SHARE = 0.8


def overrides(obj: Any, method: str) -> bool:
    """Whether ``obj``'s class defines ``method`` itself rather than inheriting Hermes' no-op."""
    for klass in type(obj).__mro__:
        if method in vars(klass):
            return klass.__module__ not in ("agent.memory_provider", "agent.context_engine")
    return False


def unavailable_reason(obj: Any) -> str:
    reason = getattr(obj, "unavailable_reason", None)
    if callable(reason):
        try:
            text = reason()
        except Exception:
            text = ""
        if isinstance(text, str) and text.strip():
            return text.strip()
    return "its is_available() is False: it needs its service, a key or a setting"


class HermesMemoryProvider(MemoryProvider):
    """Runs one Hermes memory provider; subclasses made by :func:`memory_class` set
    ``candidate``."""

    candidate: ClassVar[HermesCandidate]
    Config = HermesSection

    def __init__(self, config: HermesSection, context: PluginContext) -> None:
        super().__init__(config, context)
        self._problems: set[str] = set()
        self._lock = threading.Lock()
        self._loaded = self._load()
        first = self._loaded.providers[0]
        self.hermes_name = str(getattr(first, "name", self.candidate.plugin))
        section = self.config_section or self.name
        values = dict(config.model_extra or {})
        schema = self._safe(first, "get_config_schema", default=[])
        self._values = check_section(values, schema, plugin=self.candidate.plugin, section=section)
        if self._values and callable(getattr(first, "save_config", None)):
            # as Hermes' `memory setup` does before the agent starts: the settings are saved,
            # then the provider is built anew, so one reading them when built sees them
            home = calls.hermes_home_for(context.home, self.candidate.plugin, None)
            home.mkdir(parents=True, exist_ok=True)
            with calls.in_home(home):
                first.save_config(dict(self._values), str(home))
            self._loaded = self._load()
            first = self._loaded.providers[0]
        self.general = isinstance(first, HooksOnly)
        if not self._safe(first, "is_available", default=False):
            raise PluginError(f"Hermes plugin {self.candidate.plugin!r}: needs its service or key: "
                              f"{unavailable_reason(first)}")
        self._slots: dict[str | None, Slot] = {}
        self._spare: Loaded | None = self._loaded
        self._user_scope = context.config.memory.scope == "user"
        #: how long a turn waits for a provider's cold first prefetch (see :meth:`prefetch`)
        self._warm_wait = context.config.memory.prefetch_timeout * WARM_SHARE
        #: how long a session-boundary Hermes hook (an observer) is waited for
        self._boundary_wait = context.config.hooks.timeout("on_session_switch") * WARM_SHARE
        #: the Hermes hooks and tools its register(ctx) registered (the same for every slot)
        self._hooks = self._loaded.registered
        self._called: set[str] = set()
        #: when each running child session of a delegation began (for ``subagent_stop``)
        self._children: dict[str, float] = {}
        if self._hooks:
            _LIVE.add(self)

    # ------------------------------------------------------------------ loading and slots

    def _load(self) -> Loaded:
        # plugins that read HERMES_HOME when registered must see the bridge's folder already
        calls.point_env(self.context.home)
        try:
            loaded = load(self.candidate, calls.hermes_home_for(
                self.context.home, self.candidate.plugin, None))
        except HermesLoadError as exc:
            raise PluginError(f"{exc} (fix: {exc.fix})" if exc.fix else str(exc)) from exc
        for name in loaded.unsupported:
            self._problem(f"its register(ctx) called ctx.{name}(), which hermes-core does not "
                          "support: skipped (the rest still runs)")
        for refused in loaded.refused:
            self._problem(f"its register(ctx) call {refused} was refused (the rest still runs)")
        for hook in unmapped_hooks(loaded.registered):
            self._problem(f"its hook {hook} is not delivered in hermes-core")
        if not loaded.providers:
            if not loaded.registered:
                raise PluginError(f"Hermes plugin {self.candidate.plugin!r} registered no memory "
                                  "provider, hook or tool (a context engine: select it in "
                                  "context.engine)")
            loaded.providers.append(HooksOnly())
        return loaded

    def _problem(self, message: str) -> None:
        if message not in self._problems:
            self._problems.add(message)
            self.context.report_problem(f"Hermes plugin {self.candidate.plugin!r}: {message}")

    def _safe(self, obj: Any, method: str, *, default: Any) -> Any:
        fn = getattr(obj, method, None)
        if not callable(fn):  # providers that do not subclass Hermes' base class omit some
            return default
        try:
            return fn()
        except Exception as exc:
            self._problem(f"{method}() raised {type(exc).__name__}: {exc}")
            return default

    def _key(self, session: Session | None) -> str | None:
        return session.user_id if (self._user_scope and session is not None) else None

    @staticmethod
    def _slot_key(key: str | None, session: Session | None) -> str | None:
        """A child session of a delegation has a slot (a Hermes object) of its own."""
        if session is None or session.agent_context == "primary":
            return key
        return f"{session.agent_context}:{session.id}"

    def _slot(self, session: Session | None) -> Slot:
        key = self._key(session)
        slot_key = self._slot_key(key, session)
        with self._lock:
            slot = self._slots.get(slot_key)
            if slot is None:
                loaded = self._spare if self._spare is not None else self._load()
                self._spare = None
                home = calls.hermes_home_for(self.context.home, self.candidate.plugin, key)
                slot = self._slots[slot_key] = Slot(
                    loaded, home, f"hermes-{self.candidate.plugin}",
                    session.agent_context if session is not None else "primary")
        return slot

    def _ready(self, session: Session) -> Slot | None:
        """The slot of ``session``'s user, initialised for ``session`` (once); None while its
        ``initialize`` failed for this session (see :class:`Failure`)."""
        slot = self._slot(session)
        if slot.session_id == session.id:
            return slot
        with slot.lock:
            if slot.failure is not None and slot.failure.holds(session.id):
                return None
            try:
                if slot.session_id is None:
                    self._initialize(slot, session)
                elif slot.session_id != session.id:
                    # the new session's first hook came before the worker's on_session_switch
                    reset = session.parent_session_id != slot.session_id
                    self._switch(slot, session, slot.session_id, reset=reset, reason="")
            except Exception as exc:
                count = slot.failure.count + 1 if slot.failure is not None else 1
                slot.failure = Failure(session.id, f"{type(exc).__name__}: {exc}", count)
                self._problem(f"initialize() raised {slot.failure.message}; its hooks are "
                              "skipped for this session, and it is tried again in a later "
                              "session or after a pause")
                self._note(slot.failure.message)
                return None
            slot.failure = None
            self._note(None)  # also a note an earlier process left
        return slot

    def _note(self, failure: str | None) -> None:
        """Keep (or clear) the note ``doctor`` shows of the last failed ``initialize``."""
        try:
            if failure is None:
                status.clear_failure(self.context.home, self.candidate.plugin)
            else:
                status.note_failure(self.context.home, self.candidate.plugin, failure)
        except OSError as exc:
            self._problem(f"the note of its failed initialize() cannot be kept: {exc}")

    def _switch(self, slot: Slot, new: Session, parent: str, *, reset: bool, reason: str) -> None:
        """Move ``slot`` to session ``new``: the provider's own ``on_session_switch`` when it
        has one, else ``initialize`` again (it keeps its session from initialize)."""
        if overrides(slot.obj, "on_session_switch"):
            slot.call(call_with, slot.obj.on_session_switch, new.id, parent_session_id=parent,
                      reset=reset, rewound=False, reason=reason)
            slot.session_id = new.id
        else:
            self._initialize(slot, new)

    def _initialize(self, slot: Slot, session: Session) -> None:
        slot.hermes_home.mkdir(parents=True, exist_ok=True)
        calls.point_env(self.context.home)
        kwargs: dict[str, Any] = {"hermes_home": str(slot.hermes_home),
                                  "platform": session.platform, "agent_context": slot.agent_context,
                                  # as Hermes 0.19.0: its profile's name (the bridge has one,
                                  # "default", as ctx.profile_name) and its workspace
                                  "agent_identity": "default", "agent_workspace": "hermes"}
        if session.user_id:
            kwargs["user_id"] = session.user_id
        if session.parent_session_id:
            kwargs["parent_session_id"] = session.parent_session_id
        if session.model:
            kwargs["model"] = session.model
        save = getattr(slot.obj, "save_config", None)
        if self._values and slot.session_id is None and callable(save):
            slot.call(save, dict(self._values), str(slot.hermes_home))
        slot.session_id = None  # a failed initialize leaves the object uninitialised
        slot.call(slot.obj.initialize, session.id, **kwargs)
        slot.session_id = session.id

    def _run(self, session: Session, method: str, *args: Any, **kwargs: Any) -> Any:
        slot = self._ready(session)
        fn = getattr(slot.obj, method, None) if slot is not None else None
        if slot is None or not callable(fn):
            return None
        return slot.call(call_with, fn, *args, session_id=session.id, **kwargs)

    def _text(self, value: Any, method: str) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            self._problem(f"{method}() returned {type(value).__name__}, not str: dropped "
                          "(a Hermes provider must return text)")
            return None
        return value

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        return self._text(self._run(session, "system_prompt_block"), "system_prompt_block")

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        keep = self._hooks.has("pre_llm_call")
        if message.role != "user" and not keep:
            return
        slot = self._ready(session)
        if slot is None:
            return
        if keep:
            if slot.history_of != session.id:
                slot.history, slot.history_of = [], session.id
            slot.history.extend(to_openai([message]))
        if message.role != "user":
            return
        slot.turns += 1
        if slot.turns == 1 and slot.agent_context == "subagent":
            self._subagent_started(session, message.content)
        if overrides(slot.obj, "on_turn_start"):
            slot.call(call_with, slot.obj.on_turn_start, slot.turns, message.content,
                      platform=session.platform)

    # ------------------------------------------------------------------ Hermes hooks

    def _fire(self, session: Session, hook: str, **kwargs: Any) -> list[Any]:
        """The answers of the plugin's ``hook`` callbacks, called on its object's thread."""
        if not self._hooks.has(hook):
            return []
        slot = self._ready(session)
        if slot is None:
            return []
        self._ran(f"hook {hook}")
        return slot.call(fire, slot.hooks, hook, self._problem, **kwargs)

    def _observe(self, session: Session, hook: str, **kwargs: Any) -> None:
        """Fire a session-boundary Hermes hook, whose answer Hermes ignores, waiting for it only
        part of the kernel's deadline: a slow one (forge-hermes-plugin's on_session_start
        starts its local service) goes on on the plugin's thread, where later calls into the
        plugin queue behind it, as behind a warming prefetch, instead of missing the deadline."""
        if not self._hooks.has(hook):
            return
        slot = self._ready(session)
        if slot is None:
            return
        self._ran(f"hook {hook}")
        future = slot.pinned.submit(fire, slot.hooks, hook, self._problem, **kwargs)
        try:
            future.result(timeout=self._boundary_wait)
        except FutureTimeout:
            log.info("Hermes plugin %r: its %s hook has not answered in %.1f s; it goes on on the "
                     "plugin's thread, and later calls into the plugin wait for it",
                     self.candidate.plugin, hook, self._boundary_wait)

    def _ran(self, what: str) -> None:
        """Log (once per process) that one of the plugin's registered callables was called."""
        if what not in self._called:
            self._called.add(what)
            self.context.logger.info("Hermes plugin %r: its %s was called",
                                     self.candidate.plugin, what)

    @staticmethod
    def _turn(slot: Slot, session: Session) -> dict[str, Any]:
        """What Hermes passes to every hook of a turn."""
        return {"session_id": session.id, "task_id": session.id,
                "turn_id": f"{session.id}:{slot.turns}", "model": session.model or "",
                "platform": session.platform}

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        text = self._recall(query, session)
        if not self._hooks.has("pre_llm_call"):
            return text
        slot = self._ready(session)
        if slot is None:
            return text
        history = list(slot.history) if slot.history_of == session.id else []
        answers = slot.call(fire, slot.hooks, "pre_llm_call", self._problem, user_message=query,
                            conversation_history=history, is_first_turn=len(history) <= 1,
                            sender_id=session.user_id or "", **self._turn(slot, session))
        extra = injected_context(answers)
        return "\n\n".join(part for part in (text, extra) if part) or None

    def _recall(self, query: str, session: Session) -> str | None:
        """The provider's own ``prefetch``."""
        slot = self._ready(session)
        fn = getattr(slot.obj, "prefetch", None) if slot is not None else None
        if slot is None or not callable(fn):
            return None
        if slot.warm:
            return self._text(slot.call(call_with, fn, query, session_id=session.id), "prefetch")
        if slot.warming is not None:  # the first prefetch is still loading what it needs
            return None
        # Cold: the object's first prefetch may import a model or a library (seconds to minutes).
        # The turn waits for it only part of the prefetch deadline; past that the provider is
        # "warming": the call goes on on the object's thread, and the turns meanwhile get no
        # recall from it, at once, instead of a missed deadline each.
        future = slot.pinned.submit(call_with, fn, query, session_id=session.id)
        try:
            value = future.result(timeout=self._warm_wait)
        except FutureTimeout:
            slot.warming = future
            future.add_done_callback(lambda _done, s=slot: self._warmed(s))
            self._problem(f"warming: its first prefetch() has not answered in "
                          f"{self._warm_wait:.2f} s (loading a model or library, or hung); the "
                          "turns go on without its recall until that call ends")
            return None
        slot.warm = True
        return self._text(value, "prefetch")

    def _warmed(self, slot: Slot) -> None:
        future, slot.warming = slot.warming, None
        slot.warm = True
        error = future.exception() if future is not None else None
        if error is not None:
            self._problem(f"its first prefetch() raised {type(error).__name__}: {error}")
        else:
            log.info("Hermes plugin %r is warm", self.candidate.plugin)

    def warming(self) -> bool:
        """Whether a first prefetch is still running after its turn went on without it."""
        return any(slot.warming is not None for slot in self._slots.values())

    @hookimpl
    def queue_prefetch(self, query: str, session: Session) -> None:
        self._run(session, "queue_prefetch", query)

    @hookimpl
    def sync_turn(self, user_message: Message, assistant_message: Message, session: Session,
                  messages: list[Message]) -> None:
        slot = self._ready(session)
        if slot is None:
            return
        if callable(getattr(slot.obj, "sync_turn", None)):
            extra: dict[str, Any] = {"session_id": session.id}
            if accepts(slot.obj.sync_turn, "messages"):
                extra["messages"] = to_openai(messages)
            slot.call(call_with, slot.obj.sync_turn, user_message.content,
                      assistant_message.content, **extra)
        if self._hooks.has("post_llm_call"):
            self._fire(session, "post_llm_call", user_message=user_message.content,
                       assistant_response=assistant_message.content,
                       conversation_history=to_openai(messages), **self._turn(slot, session))
        # Hermes 0.19.0 fires on_session_end at the end of every turn (run_conversation)
        self._fire(session, "on_session_end", completed=True, interrupted=False,
                   **self._turn(slot, session))

    @hookimpl
    def on_pre_compress(self, messages: list[Message], session: Session) -> str | None:
        slot = self._ready(session)
        fn = getattr(slot.obj, "on_pre_compress", None) if slot is not None else None
        if slot is None or not callable(fn):
            return None
        return self._text(slot.call(fn, to_openai(messages)), "on_pre_compress")

    @hookimpl
    def on_session_switch(self, new_session: Session, old_session: Session | None,
                          reason: SwitchReason) -> None:
        slot = self._slot(new_session)
        with slot.lock:
            if slot.session_id is not None and slot.session_id != new_session.id:
                parent = old_session.id if old_session is not None else slot.session_id
                self._switch(slot, new_session, parent, reason=str(reason),
                             reset=reason in (SwitchReason.NEW, SwitchReason.RESET))
        # otherwise initialised lazily, or already moved by the new session's first hook
        if reason == SwitchReason.RESET or (reason == SwitchReason.NEW and old_session is not None):
            self._observe(new_session, "on_session_reset", session_id=new_session.id,
                          platform=new_session.platform, reason="new_session")
        if reason == SwitchReason.NEW:  # a brand-new session: not a resume, not a compaction
            self._observe(new_session, "on_session_start", session_id=new_session.id,
                          model=new_session.model or "", platform=new_session.platform)
        if reason == SwitchReason.DELEGATION:
            self._children[new_session.id] = time.monotonic()

    @hookimpl
    def on_session_end(self, session: Session, messages: list[Message], reason: EndReason) -> None:
        if session.agent_context != "primary":
            self._end_child(session)
            return
        slot = self._slots.get(self._key(session))
        fn = getattr(slot.obj, "on_session_end", None) if slot is not None else None
        if slot is not None and slot.session_id is not None and callable(fn):
            slot.call(fn, to_openai(messages))
        if slot is not None and slot.session_id is not None:
            self._fire(session, "on_session_finalize", session_id=session.id,
                       platform=session.platform,
                       reason="session_boundary" if reason == EndReason.NEW_SESSION else "shutdown")

    def _end_child(self, session: Session) -> None:
        """A delegated child session ended: its Hermes object is shut down and dropped. Its
        messages reach no ``on_session_end`` (a child's turns are not the user's)."""
        with self._lock:
            slot = self._slots.pop(self._slot_key(self._key(session), session), None)
        if slot is None:
            return
        try:
            fn = getattr(slot.obj, "shutdown", None)
            if slot.session_id is not None and callable(fn):
                slot.call(fn)
        finally:
            slot.pinned.close()

    def _subagent_started(self, child: Session, goal: str) -> None:
        """``subagent_start`` on the delegating session's object, as Hermes fires it on the
        parent's side when a child begins."""
        if not self._hooks.has("subagent_start"):
            return
        with self._lock:
            parent = next((s for s in self._slots.values()
                           if s.session_id == child.parent_session_id), None)
        if parent is None:
            return
        self._ran("hook subagent_start")
        parent.call(fire, parent.hooks, "subagent_start", self._problem, **start_kwargs(
            child, goal, f"{child.parent_session_id}:{parent.turns}",
            parent.agent_context == "subagent", self.context.config.delegation.max_depth))

    @hookimpl
    def on_delegation(self, task: str, result: str, child_session_id: str, status: str,
                      session: Session) -> None:
        started = self._children.pop(child_session_id, None)
        slot = self._ready(session)
        if slot is None:
            return
        fn = getattr(slot.obj, "on_delegation", None)
        if callable(fn):
            slot.call(call_with, fn, task, delegated_result(result, status),
                      child_session_id=child_session_id)
        ms = int((time.monotonic() - started) * 1000) if started is not None else 0
        self._fire(session, "subagent_stop", **stop_kwargs(
            session, child_session_id, result, status, f"{session.id}:{slot.turns}", ms,
            self.context.config.delegation.max_depth))

    @hookimpl
    def on_memory_write(self, write: MemoryWrite) -> None:
        slots = [s for s in self._slots.values()
                 if s.session_id is not None and s.agent_context == "primary"]
        chosen = [s for s in slots if s.session_id == write.session_id] or slots[:1]
        metadata = write_metadata(write)
        for slot in chosen:
            fn = getattr(slot.obj, "on_memory_write", None)
            if callable(fn):
                slot.call(call_with, fn, write.action, write.target, write.content,
                          metadata=metadata)

    @hookimpl
    def shutdown(self) -> None:
        _LIVE.discard(self)
        for slot in list(self._slots.values()):
            fn = getattr(slot.obj, "shutdown", None)
            try:
                if slot.session_id is not None and callable(fn):
                    slot.call(fn)
            finally:
                slot.pinned.close()

    @hookimpl
    def get_tools(self) -> list[Tool]:
        # a static description, asked on the caller's thread: the tools are offered even while
        # the object's own thread is held by a hung call
        with self._lock:
            spare = self._spare
            first = next(iter(self._slots.values()), None)
        obj = first.obj if first is not None else spare.providers[0] if spare else None
        tools = [] if self.general else hermes_tools(obj, self.name, self._problem,
                                                     self._call_tool, check=False)
        # a provider's own tool wins over a ctx.register_tool of the same name (mnemosyne-hermes
        # registers each of its provider's tools again): Hermes loads a provider's register(ctx)
        # with a register_tool that does nothing, and offers the provider's tools
        own = {tool.name for tool in tools}
        return tools + [t for t in self._registered_tools(
            first.hooks if first is not None else spare.registered if spare else self._hooks)
            if t.name not in own]

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
        slot = self._ready(ctx.session)
        if slot is None:
            failure = self._slot(ctx.session).failure
            raise ToolError(f"{self.name} is not available in this session: its initialize() "
                            f"failed ({failure.message if failure else 'unknown error'})")
        return slot, ctx.session

    def _call_tool(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> str:
        slot, session = self._tool_slot(tool, ctx)
        return self._guarded(slot, session, tool, args, ctx, lambda: tool_result(
            self.name, tool, slot.call(slot.obj.handle_tool_call, tool, args), self._problem))

    def _call_registered(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> str:
        slot, session = self._tool_slot(tool, ctx)
        entry = next((e for e in slot.hooks.tools if e.name == tool), None)
        if entry is None:
            raise ToolError(f"{self.name} has no tool {tool!r} in this session")
        self._ran(f"tool {tool}")
        return self._guarded(slot, session, tool, args, ctx, lambda: result_text(slot.call(
            run_handler, entry, args, task_id=session.id, session_id=session.id)))

    def _tool_base(self, session: Session, tool: str, args: dict[str, Any], call_id: str
                   ) -> dict[str, Any] | None:
        """What Hermes passes to its tool hooks about one call (``None``: no slot this session)."""
        slot = self._ready(session)
        if slot is None:
            return None
        base = {"tool_name": tool, "args": args, "tool_call_id": call_id, "api_request_id": "",
                "middleware_trace": [], **self._turn(slot, session)}
        base.pop("model"), base.pop("platform")
        return base

    def _guarded(self, slot: Slot, session: Session, tool: str, args: dict[str, Any],
                 ctx: ToolContext, run: Callable[[], str]) -> str:
        """Run a Hermes tool and hand its result to the ``transform_tool_result`` hooks of every
        live bridged plugin, as Hermes' dispatch does (``pre_tool_call`` and ``post_tool_call``
        come from the kernel's hooks around every call)."""
        text = run()
        peers = [p for p in list(_LIVE) if p.context.home == self.context.home
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
        return block_message(self._fire(session, "pre_tool_call", **base), call.name)

    @hookimpl
    def on_post_tool_call(self, call: ToolCall, session: Session | None, outcome: ToolOutcome
                          ) -> None:
        """Hermes' ``post_tool_call`` after every tool call hermes-core made or blocked."""
        if session is None or not self._hooks.has("post_tool_call"):
            return
        base = self._tool_base(session, call.name, dict(call.arguments), call.id)
        if base is not None:
            self._fire(session, "post_tool_call", **base, **post_tool_fields(
                outcome.content, outcome.is_error, outcome.blocked_by is not None,
                outcome.seconds))


def memory_class(candidate: HermesCandidate) -> type[HermesMemoryProvider]:
    """A hermes-core provider class named ``candidate.name`` for one Hermes plugin."""
    return type(_class_name(candidate), (HermesMemoryProvider,), {
        "name": candidate.name, "candidate": candidate, "__module__": __name__,
        "description": f"Hermes memory provider {candidate.plugin!r} ({candidate.where})"})


def _class_name(candidate: HermesCandidate) -> str:
    return "Hermes_" + "".join(ch if ch.isalnum() else "_" for ch in candidate.plugin)


