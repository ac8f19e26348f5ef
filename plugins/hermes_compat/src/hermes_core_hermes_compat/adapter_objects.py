"""The Hermes objects behind one bridged memory provider (:mod:`.adapter_memory`).

A Hermes provider object is bound to one session at a time and must be called from one thread, so
the adapter keeps a :class:`~.slots.Slot` (an object, its own thread, its Hermes home) per user
key, and one per delegated child session. This module holds that part of the adapter: loading the
plugin (``register(ctx)``), choosing the slot of a session, ``initialize`` once per session
(lazily, with Hermes' keyword arguments) or ``on_session_switch`` when the session changes, the
failed-``initialize`` bookkeeping that ``doctor`` shows, and firing the hooks the plugin's
``register(ctx)`` registered on the slot's thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar, TypeVar

from hermes_core.errors import PluginError
from hermes_core.kinds import PluginContext
from hermes_core.types import Session

from . import calls, status
from .convert import call_with
from .discovery import HermesCandidate
from .general import HooksOnly, Registered, fire, unmapped_hooks
from .host_access import HostAccess
from .loading import HermesLoadError, Loaded, bounded, deadline, load
from .slots import Failure, Slot

__all__ = ["Bridged", "ProviderObjects", "bridged_class", "overrides", "unavailable_reason"]

log = logging.getLogger(__name__)


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



#: the chat identity Hermes' gateway passes to ``initialize`` when it knows it
_CHAT_FIELDS = ("user_id_alt", "user_name", "chat_id", "chat_name", "chat_type", "thread_id")

B = TypeVar("B", bound="Bridged")
T = TypeVar("T")


class Bridged:
    """What the memory and the engine adapter share: loading their Hermes plugin (a failure as
    the kernel's :class:`PluginError`) and reporting each of its problems once."""

    candidate: ClassVar[HermesCandidate]
    context: PluginContext
    _problems: set[str]

    def _load_plugin(self) -> Loaded:
        # plugins that read HERMES_HOME when registered must see the bridge's folder already
        calls.point_env(self.context.home)
        try:
            return load(self.candidate, calls.hermes_home_for(
                self.context.home, self.candidate.plugin, None), HostAccess(self.context),
                timeout=deadline(self.context.config))
        except HermesLoadError as exc:
            raise PluginError(f"{exc} (fix: {exc.fix})" if exc.fix else str(exc)) from exc

    def _problem(self, message: str) -> None:
        if message not in self._problems:
            self._problems.add(message)
            self.context.report_problem(f"Hermes plugin {self.candidate.plugin!r}: {message}")


def bridged_class(base: type[B], prefix: str, what: str, candidate: HermesCandidate) -> type[B]:
    """A subclass of ``base`` named ``candidate.name`` (the hermes-core name) for one plugin."""
    return type(prefix + "".join(ch if ch.isalnum() else "_" for ch in candidate.plugin), (base,),
                {"name": candidate.name, "candidate": candidate, "__module__": base.__module__,
                 "description": f"Hermes {what} {candidate.plugin!r} ({candidate.where})"})


class ProviderObjects(Bridged):
    """Loading, per-session slots and registered-hook firing of
    :class:`~.adapter_memory.HermesMemoryProvider` (its base; set up by its ``__init__``)."""

    _lock: threading.Lock
    _slots: dict[str | None, Slot]
    #: each session seen so far and its slot's key (where its memory writes go)
    _served: dict[str, tuple[str | None, Session]]
    _spare: bool
    _loaded: Loaded
    _user_scope: bool
    _values: dict[str, Any]
    _boundary_wait: float
    _guard_wait: float
    _hooks: Registered
    #: the plugin registered hooks or tools but no memory provider
    general: bool
    _called: set[str]

    def _load(self) -> Loaded:
        loaded = self._load_plugin()
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

    def _safe(self, obj: Any, method: str, *, default: Any, limit: bool = False) -> Any:
        """``obj.method()``; one that raises is reported and ``default`` answers. ``limit``:
        bounded (:func:`.loading.bounded`), a hung one raising :class:`PluginError`."""
        fn = getattr(obj, method, None)
        if not callable(fn):  # providers that do not subclass Hermes' base class omit some
            return default
        try:
            if limit:
                return bounded(self.candidate, f"{method}()", deadline(self.context.config),
                               calls.hermes_home_for(self.context.home, self.candidate.plugin,
                                                     None), fn)
            return fn()
        except HermesLoadError as exc:
            raise PluginError(f"{exc} (fix: {exc.fix})") from exc
        except Exception as exc:
            self._problem(f"{method}() raised {type(exc).__name__}: {exc}")
            return default

    def _bounded(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` (``what`` of the plugin) under :func:`.loading.bounded` in the plugin's
        folder, by ``hooks.timeouts.doctor_checks``; a hung one raises :class:`PluginError`
        naming it, what it raises goes through."""
        try:
            return bounded(self.candidate, what, deadline(self.context.config),
                           calls.hermes_home_for(self.context.home, self.candidate.plugin, None),
                           fn)
        except HermesLoadError as exc:
            raise PluginError(f"{exc} (fix: {exc.fix})") from exc

    def _key(self, session: Session | None) -> str | None:
        return session.user_id if (self._user_scope and session is not None) else None

    @staticmethod
    def _slot_key(key: str | None, session: Session | None) -> str | None:
        """The slot (one Hermes object) serving ``session``. Hermes loads a provider object per
        agent, and its gateway keeps an agent per conversation: so one object per conversation
        (``attributes["conversation_key"]`` on its platform, set by the dispatcher and kept
        across ``/new`` and compactions), under the user ``key`` (``memory.scope: user``); a
        session without a conversation key has the user's one object; a child session of a
        delegation has its own."""
        if session is None:
            return key
        if session.agent_context != "primary":
            return f"{session.agent_context}:{session.id}"
        conversation = session.attributes.get("conversation_key")
        if conversation is None:
            return key
        return f"{key or ''}\x1f{session.platform}:{conversation}"

    def _slot(self, session: Session | None) -> Slot:
        key = self._key(session)
        slot_key = self._slot_key(key, session)
        with self._lock:
            if session is not None:
                self._served[session.id] = (slot_key, session)
            slot = self._slots.get(slot_key)
            if slot is None:
                # Hermes registers a plugin's hooks and tools once per process; only a memory
                # provider object is made per agent (its loader runs register(ctx) again for
                # that object and keeps nothing else of it): every slot fires the first
                # registration's hooks, and a plugin with no provider shares its one object
                loaded = self._loaded if self._spare or self.general else self._load()
                self._spare = False
                home = calls.hermes_home_for(self.context.home, self.candidate.plugin, key)
                slot = self._slots[slot_key] = Slot(
                    loaded.providers[0], home, f"hermes-{self.candidate.plugin}",
                    session.agent_context if session is not None else "primary")
        return slot

    def _ready(self, session: Session, *, move: bool = True) -> Slot | None:
        """The slot of ``session``'s user, initialised for ``session`` (once); None while its
        ``initialize`` failed for this session (see :class:`Failure`).

        ``move=False`` (the hooks the turn runs: the prompt, ``on_message``, tools): an object
        initialised for another session is used as it is. Hermes moves a provider to the next
        session only in the order of its writes (the old session's ``on_session_end``, then
        ``on_session_switch``, on one background worker) and its providers keep the session in
        their own state; the prompt of the next session is built before those queued calls run,
        so moving the object there would file the old session's end under the new one."""
        slot = self._slot(session)
        if slot.session_id == session.id or (not move and slot.session_id is not None):
            return slot
        with slot.lock:
            if slot.failure is not None and slot.failure.holds(session.id):
                return None
            try:
                if slot.session_id is None:
                    self._initialize(slot, session)
                elif slot.session_id != session.id and move:
                    # a write of this session reached the object before an on_session_switch
                    # moved it (another conversation's object, under memory.scope: shared)
                    reset = session.parent_session_id != slot.session_id
                    self._switch(slot, session, slot.session_id, reset=reset,
                                 reason="" if reset else "compression")
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
        has one. Hermes never initialises one object twice: a provider without it keeps its
        session through a compaction (Hermes calls it nothing), and for a new, reset or
        resumed session gets what Hermes' gateway gives it, a new object (the old one shut
        down) initialised for the session."""
        if overrides(slot.obj, "on_session_switch"):
            # as Hermes' MemoryManager: ``reason`` its word for the change, ``rewound`` never
            # passed unless true (providers taking **kwargs compare them whole)
            extra = {"reason": reason} if reason else {}
            slot.call(call_with, slot.obj.on_session_switch, new.id, parent_session_id=parent,
                      reset=reset, **extra)
            slot.session_id = new.id
        elif reason == "compression" or isinstance(slot.obj, HooksOnly):
            slot.session_id = new.id  # (a plugin with hooks only has no session to move)
        else:
            self._renew(slot)
            self._initialize(slot, new)

    def _renew(self, slot: Slot) -> None:
        """Shut the slot's object down and put a newly loaded one in its place."""
        loaded = self._load()
        if slot.session_id is not None:  # its successor is made all the same
            self._call_reported(slot, "shutdown")
        slot.obj, slot.session_id = loaded.providers[0], None
        slot.warm = False

    def _call_reported(self, slot: Slot, method: str, *args: Any) -> None:
        """``method(*args)`` of the slot's object, when it has one, on its thread; one that
        raises is reported, and what the caller does next still happens."""
        fn = getattr(slot.obj, method, None)
        try:
            if callable(fn):
                slot.call(fn, *args)
        except Exception as exc:
            self._problem(f"{method}() raised {type(exc).__name__}: {exc}")

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
        if session.parent_session_id and slot.agent_context != "primary":
            kwargs["parent_session_id"] = session.parent_session_id  # Hermes: subagents only
        if session.title:
            kwargs["session_title"] = session.title
        conversation = session.attributes.get("conversation_key")
        if conversation is not None:
            # what Hermes' gateway passes as its per-chat key (Honcho scopes its session by it)
            kwargs["gateway_session_key"] = f"{session.platform}:{conversation}"
        for name in _CHAT_FIELDS:  # a platform that knows them sets them in the attributes
            value = session.attributes.get(name)
            if isinstance(value, str) and value:
                kwargs[name] = value
        save = getattr(slot.obj, "save_config", None)
        if self._values and callable(save):
            slot.call(save, dict(self._values), str(slot.hermes_home))
        # session_id is None here (both callers), and stays None when initialize raises
        slot.call(slot.obj.initialize, session.id, **kwargs)
        slot.session_id = session.id

    def _text(self, value: Any, method: str) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            self._problem(f"{method}() returned {type(value).__name__}, not str: dropped "
                          "(a Hermes provider must return text)")
            return None
        return value


    # ------------------------------------------------------------------ Hermes hooks

    def _fire(self, session: Session, hook: str, *, move: bool = True, observe: bool = False,
              **kwargs: Any) -> list[Any]:
        """The answers of the plugin's ``hook`` callbacks, called on its object's thread.

        ``observe``: a session-boundary Hermes hook, whose answer Hermes ignores, waited for only
        part of the kernel's deadline (no answers): a slow one (forge-hermes-plugin's
        on_session_start starts its local service) goes on on the plugin's thread, where later
        calls into the plugin queue behind it, as behind a warming prefetch, instead of missing
        the deadline."""
        if not self._hooks.has(hook):
            return []
        slot = self._ready(session, move=move)
        if slot is None:
            return []
        self._ran(f"hook {hook}")
        if not observe:
            return slot.call(fire, self._hooks, hook, self._problem, **kwargs)
        future = slot.pinned.submit(fire, self._hooks, hook, self._problem, **kwargs)
        try:
            future.result(timeout=self._boundary_wait)
        except FutureTimeout:
            log.info("Hermes plugin %r: its %s hook has not answered in %.1f s; it goes on on the "
                     "plugin's thread, and later calls into the plugin wait for it",
                     self.candidate.plugin, hook, self._boundary_wait)
        return []

    def _ran(self, what: str) -> None:
        """Log (once per process) that one of the plugin's registered callables was called."""
        if what not in self._called:
            self._called.add(what)
            self.context.logger.info("Hermes plugin %r: its %s was called",
                                     self.candidate.plugin, what)

    @staticmethod
    def _turn(slot: Slot, session: Session) -> dict[str, Any]:
        """What Hermes passes to every hook of a turn."""
        turn = slot.turns_of(session.id, session.parent_session_id)
        return {"session_id": session.id, "task_id": session.id,
                "turn_id": f"{session.id}:{turn}", "model": session.model or "",
                "platform": session.platform}
