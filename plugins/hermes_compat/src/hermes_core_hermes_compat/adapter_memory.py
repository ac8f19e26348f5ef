"""A Hermes memory provider as a hermes-core memory provider (``hermes-<name>``).

:func:`memory_class` builds, for one discovered plugin, a :class:`~hermes_core.MemoryProvider`
subclass; the plugin is imported only when the kernel instantiates that class (the provider is
selected in ``memory.providers``, or ``config validate`` / ``doctor`` build it). Every Hermes
method is called from one of the instance's hook implementations, so the kernel's deadlines,
isolation and problem reports apply to it like to any provider.

The mapping (hermes-core hook -> Hermes method):

* the first hook reaching an object not initialised yet -> ``initialize(session_id,
  hermes_home=..., platform=..., agent_context=..., user_id=..., parent_session_id=...)``; an
  object is moved to another session only by the hooks queued on the plugin's lane, in their
  order (the old session's ``on_session_end``, then ``on_session_switch``), as Hermes' memory
  worker does, never by a hook the turn runs (``ProviderObjects._ready``); under
  ``memory.scope: user`` one Hermes provider object per user key, each in its own home; a
  delegated child session (``agent_context`` ``"subagent"``) gets an object of its own, shut down
  when the child ends (see :mod:`.delegation`);
* ``system_prompt_block`` -> ``system_prompt_block()``; ``prefetch`` -> ``prefetch(query,
  session_id=)`` (the object's first one waited for only part of the deadline: a provider still
  loading is "warming", see :meth:`HermesMemoryProvider.prefetch`); ``queue_prefetch`` ->
  ``queue_prefetch(query, session_id=)``;
* ``on_message`` (user message) -> ``on_turn_start(turn_number, text)`` (plus newer Hermes'
  ``author_id=``, ``author_name=``, ``author_is_bot=`` to one naming them);
* ``on_message`` (the model's last reply of a turn) -> the hooks ``post_llm_call`` and the
  per-turn ``on_session_end``, before the turn returns (:meth:`HermesMemoryProvider._end_now`);
  ``sync_turn`` -> ``sync_turn(user, assistant, session_id=, messages=)`` (``messages`` only when
  the plugin's signature takes it; newer Hermes' ``turn_author=`` when it names it and the
  session has a user key), and those two hooks for a turn whose end did not come from
  ``on_message``; ``on_turn_cancelled`` -> that ``on_session_end`` with ``interrupted=True``;
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
nothing until a later session, or until :data:`.slots.RETRY_SECONDS` (doubling after each
failure, up to :data:`.slots.RETRY_MAX_SECONDS`) have passed; its tools answer with the reason
meanwhile. Loading and the per-session objects are in :mod:`.adapter_objects`, the tools and the
hooks around every tool call in :mod:`.adapter_tools`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, ClassVar

from hermes_core import hookimpl
from hermes_core.errors import PluginError
from hermes_core.kinds import MemoryProvider, PluginContext
from hermes_core.types import EndReason, MemoryWrite, Message, Session, SwitchReason

from . import calls
from .adapter_objects import bridged_class, overrides, unavailable_reason
from .adapter_tools import LIVE, ProviderTools
from .convert import accepts, author_keywords, call_with, names, to_openai, turn_author, write_metadata
from .delegation import delegated_result, start_kwargs, stop_kwargs
from .discovery import HermesCandidate
from .general import HooksOnly, fire, injected_context
from .loading import unload
from .settings import HermesSection, check_section
from .slots import Slot
from .turn_ends import TurnBook, trim

__all__ = ["WARM_SHARE", "HermesMemoryProvider", "memory_class"]

log = logging.getLogger(__name__)

#: the share of ``memory.prefetch_timeout`` a turn waits for a provider's first (cold) prefetch
WARM_SHARE = 0.8
#: the ``reason`` Hermes 0.19.0 passes to ``on_session_switch`` for each kind of change (a reset
#: of a conversation key starts a fresh session, as ``/new`` does)
_HERMES_REASON = {SwitchReason.NEW: "new_session", SwitchReason.RESET: "new_session",
                  SwitchReason.RESUME: "resume", SwitchReason.COMPRESSION: "compression",
                  SwitchReason.BRANCH: "branch"}


class HermesMemoryProvider(ProviderTools, MemoryProvider):
    """Runs one Hermes memory provider; subclasses made by :func:`memory_class` set
    ``candidate``. Its Hermes objects are kept by :class:`~.adapter_objects.ProviderObjects`,
    its tools offered by :class:`~.adapter_tools.ProviderTools`."""

    candidate: ClassVar[HermesCandidate]
    Config = HermesSection

    def __init__(self, config: HermesSection, context: PluginContext) -> None:
        super().__init__(config, context)
        self._problems: set[str] = set()
        self._lock = threading.Lock()
        self._loaded = self._load()
        first = self._loaded.providers[0]
        section = self.config_section or self.name
        values = dict(config.model_extra or {})
        schema = self._safe(first, "get_config_schema", default=[], limit=True)
        self._values = check_section(values, schema, plugin=self.candidate.plugin, section=section)
        if self._values and callable(getattr(first, "save_config", None)):
            # as Hermes' `memory setup` does before the agent starts: the settings are saved,
            # then the provider is built anew, so one reading them when built sees them
            home = calls.hermes_home_for(context.home, self.candidate.plugin, None)
            home.mkdir(parents=True, exist_ok=True)
            saving = first
            self._bounded("save_config()",
                          lambda: saving.save_config(dict(self._values), str(home)))
            self._loaded = self._load()
            first = self._loaded.providers[0]
        self.general = isinstance(first, HooksOnly)
        if not self._safe(first, "is_available", default=False, limit=True):
            unavailable = first
            reason = self._bounded("unavailable_reason()",
                                   lambda: unavailable_reason(unavailable))
            raise PluginError(f"Hermes plugin {self.candidate.plugin!r}: needs its service or key: "
                              f"{reason}")
        self._slots: dict[str | None, Slot] = {}
        self._served: dict[str, tuple[str | None, Session]] = {}
        #: the first load (``_loaded``) is not any slot's yet: the first slot takes it
        self._spare = True
        self._user_scope = context.config.memory.scope == "user"
        #: how long a turn waits for a provider's cold first prefetch (see :meth:`prefetch`)
        self._warm_wait = context.config.memory.prefetch_timeout * WARM_SHARE
        #: how long a session-boundary Hermes hook (an observer) is waited for
        self._boundary_wait = context.config.hooks.timeout("on_session_switch") * WARM_SHARE
        #: how long a tool call waits for the plugin's pre_tool_call before it is blocked
        self._guard_wait = context.config.hooks.timeout("on_pre_tool_call") * WARM_SHARE
        #: how long a turn's end waits for the plugin's post_llm_call and on_session_end
        self._end_wait = context.config.hooks.timeout("on_message") * WARM_SHARE
        #: how long the prompt waits for a block before the last one answers
        self._prompt_wait = context.config.hooks.timeout("system_prompt_block") * WARM_SHARE
        #: the Hermes hooks and tools its register(ctx) registered (the same for every slot)
        self._hooks = self._loaded.registered
        self._called: set[str] = set()
        #: when each running child session of a delegation began (for ``subagent_stop``)
        self._children: dict[str, float] = {}
        #: each turn's identity and where its end comes from (:mod:`.turn_ends`)
        self._book = TurnBook()
        #: how long a turn's end waits for its session's switch to reach the object
        self._switch_wait = min(1.0, self._end_wait / 4)
        # a pre_llm_call answer belongs to its one user message: a late one is never served at
        # a later turn (the kernel would reuse a late provider's last answer)
        self.reuse_prefetch = not self._hooks.has("pre_llm_call")
        if self._hooks:
            LIVE.add(self)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        """The provider's ``system_prompt_block()``. Hermes asks it on the agent's thread while
        its memory worker may be inside a slow call (an ``on_session_end`` extracting with a
        model); here both share the object's one thread, so when the block does not come within
        most of the deadline, the object's last block answers (Hermes documents the block as
        static text) and the call, still queued, refreshes it."""
        slot = self._ready(session, move=False)
        fn = getattr(slot.obj, "system_prompt_block", None) if slot is not None else None
        if slot is None or not callable(fn):
            return None
        future = slot.pinned.submit(call_with, fn, session_id=session.id)
        try:
            slot.block = self._text(future.result(timeout=self._prompt_wait),
                                    "system_prompt_block")
        except FutureTimeout:
            def refresh(done: Future[Any], s: Slot = slot) -> None:
                if done.exception() is None:
                    s.block = self._text(done.result(), "system_prompt_block")
            future.add_done_callback(refresh)
            log.info("Hermes plugin %r: system_prompt_block() waits behind a slow call; its "
                     "last block answers meanwhile", self.candidate.plugin)
        return slot.block

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        if message.role == "user" and "carried_over" not in message.meta:
            self._book.asked(session.id, message)  # its turn's identity is taken in prefetch
        keep = self._hooks.has("pre_llm_call") or self._hooks.has("post_llm_call")
        ends = self._ends_turn(message, session)
        if message.role != "user" and not (keep or ends):
            return
        slot = self._ready(session, move=False)
        if slot is None:
            return
        if keep:
            with self._book.lock:
                slot.remember(session.id, message)
        if message.role == "user" and slot.agent_context == "subagent" and not slot.began:
            slot.began = True
            self._subagent_started(session, message.content)
        if ends:
            self._end_now(slot, session, message)

    def _ends_turn(self, message: Message, session: Session) -> bool:
        """Whether ``message`` is the model's last reply of a user turn (one without tool calls:
        the turn ends with it), whose end Hermes hooks are waiting for."""
        return (message.role == "assistant" and not message.tool_calls
                and "usage" in message.meta and session.agent_context == "primary"
                and (self._hooks.has("post_llm_call") or self._hooks.has("on_session_end")))

    def _end_now(self, slot: Slot, session: Session, reply: Message) -> None:
        """The turn's ``post_llm_call`` and ``on_session_end``, as Hermes fires them: before the
        turn returns, so before anything of the next turn (its ``pre_llm_call``, its tool
        calls) reaches the plugin. They are handed to the plugin's thread now and waited for up
        to most of the ``on_message`` deadline (not while an earlier turn's end is still
        running there); a slower one goes on there, still ahead of every later call into the
        plugin. Left to ``sync_turn`` when the turn's start was not seen, when
        an earlier turn's end is still to come from the lane (:class:`.turn_ends.TurnBook`), or
        when ``post_llm_call`` would get a history that lacks the session's older messages
        (after a resume, until its first turn is stored; or the session's switch is still held
        on the lane behind a slow call)."""
        started = time.monotonic()
        book = self._book
        with book.switched:
            user = book.claim(session)
            if user is None:
                return
            if self._hooks.has("post_llm_call"):
                # whether the history is whole is known once the session's switch (queued on the
                # lane when it began, first there) has reached the object: at most a moment
                book.switched.wait_for(lambda: session.id in slot.whole, timeout=self._switch_wait)
                if not slot.whole.get(session.id):
                    book.lag(user, session)
                    return
            history = list(slot.histories.get(session.id, ()))
            book.fired(user)
        turn = self._ended(user, slot, session)
        # a thread still inside an earlier turn's end (a hung plugin) is not waited for again
        waited = slot.ending is None or slot.ending.done()
        future = slot.ending = slot.pinned.submit(self._ends, slot, user.content, reply,
                                                  history, turn)
        if not waited:
            return
        try:
            future.result(timeout=max(0.0, self._end_wait - (time.monotonic() - started)))
        except FutureTimeout:
            log.info("Hermes plugin %r: its turn-end hooks have not answered in %.1f s; they go "
                     "on on the plugin's thread, and later calls into the plugin wait for them",
                     self.candidate.plugin, self._end_wait)

    def _ends(self, slot: Slot, user: str, reply: Message, history: list[Message],
              turn: dict[str, Any]) -> None:
        """On the plugin's thread: ``post_llm_call`` (a turn with reply text), then the
        per-turn ``on_session_end`` (Hermes 0.19.0 fires it at the end of every
        ``run_conversation``; a turn that spent its budget on tool calls or has no reply did not
        complete)."""
        if reply.content and self._hooks.has("post_llm_call"):
            self._ran("hook post_llm_call")
            fire(self._hooks, "post_llm_call", self._problem, user_message=user,
                 assistant_response=reply.content, conversation_history=to_openai(history),
                 **turn)
        if self._hooks.has("on_session_end"):
            self._ran("hook on_session_end")
            fire(self._hooks, "on_session_end", self._problem,
                 completed=bool(reply.content) and not reply.tool_calls, interrupted=False, **turn)

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        slot = self._ready(session, move=False)
        if slot is None:
            return None
        self._turn_starts(slot, session, query)
        turn = self._turn(slot, session)
        self._book.started(session, query, turn)
        text = self._recall(query, session, slot)
        if not self._hooks.has("pre_llm_call"):
            return text
        with self._book.lock:
            history = to_openai(slot.histories.get(session.id, []))
        answers = self._fire(session, "pre_llm_call", move=False, user_message=query,
                             conversation_history=history, is_first_turn=len(history) <= 1,
                             sender_id=session.user_id or "", **turn)
        extra = injected_context(answers)
        return "\n\n".join(part for part in (text, extra) if part) or None

    def _turn_starts(self, slot: Slot, session: Session, query: str) -> None:
        """``on_turn_start(turn_number, message)``, as Hermes calls it: once per turn, just
        before the turn's prefetch (not for the messages a compaction carries into the next
        session), numbered from 1 in each session, a compaction's child going on counting. One
        that raises is reported and costs the turn's recall nothing (Hermes ignores it too);
        while the first prefetch is still warming the object up, it is queued behind it."""
        number = slot.turns[session.id] = slot.turns_of(session.id,
                                                       session.parent_session_id) + 1
        if not overrides(slot.obj, "on_turn_start"):
            return
        author = author_keywords(slot.obj.on_turn_start, session)  # newer Hermes' keywords
        if slot.warming is not None:
            future = slot.pinned.submit(slot.obj.on_turn_start, number, query, **author)
            future.add_done_callback(lambda done: self._turn_start_failed(done.exception()))
            return
        try:
            slot.call(slot.obj.on_turn_start, number, query, **author)
        except Exception as exc:
            self._turn_start_failed(exc)

    def _turn_start_failed(self, exc: BaseException | None) -> None:
        if exc is not None:
            self._problem(f"on_turn_start() raised {type(exc).__name__}: {exc}")

    def _recall(self, query: str, session: Session, slot: Slot) -> str | None:
        """The provider's own ``prefetch``."""
        fn = getattr(slot.obj, "prefetch", None)
        if not callable(fn):
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
            def warmed(_done: object, s: Slot = slot) -> None:
                self._warmed(s)
            future.add_done_callback(warmed)
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

    @hookimpl
    def queue_prefetch(self, query: str, session: Session) -> None:
        slot = self._ready(session)
        fn = getattr(slot.obj, "queue_prefetch", None) if slot is not None else None
        if slot is not None and callable(fn):
            slot.call(call_with, fn, query, session_id=session.id)

    @hookimpl
    def sync_turn(self, user_message: Message, assistant_message: Message, session: Session,
                  messages: list[Message]) -> None:
        slot = self._ready(session)
        if slot is None:
            return
        # a resumed session goes on from its stored turns, as Hermes counts them
        slot.turns[session.id] = max(slot.turns_of(session.id, session.parent_session_id),
                                     sum(m.role == "user" for m in messages))
        with self._book.lock:  # the stored history (older messages, after a resume) for hooks
            slot.caught_up(session.id, messages)
        ended = self._book.fired_early(user_message)
        # as Hermes: a turn that ended without a reply (a budget spent on tool calls, an
        # interruption before any text) is not stored in the provider
        complete = bool(user_message.content.strip() and assistant_message.content.strip())
        if complete and callable(getattr(slot.obj, "sync_turn", None)):
            extra: dict[str, Any] = {"session_id": session.id}
            if accepts(slot.obj.sync_turn, "messages"):
                extra["messages"] = to_openai(messages)
            author = turn_author(session)
            if author is not None and names(slot.obj.sync_turn, "turn_author"):
                extra["turn_author"] = author  # newer Hermes': only to a sync_turn taking it
            slot.call(call_with, slot.obj.sync_turn, user_message.content,
                      assistant_message.content, **extra)
        if ended:
            return  # its end hooks fired when its reply came (on_message)
        if self._hooks.has("post_llm_call") or self._hooks.has("on_session_end"):
            slot.call(self._ends, slot, user_message.content, assistant_message, messages,
                      self._ended(user_message, slot, session))
        self._book.landed(user_message, session)

    @hookimpl
    def on_turn_cancelled(self, user_message: Message, session: Session) -> None:
        """Hermes' per-turn ``on_session_end`` of an interrupted turn (no ``post_llm_call``, and
        nothing stored in the provider, as Hermes does for one)."""
        slot = self._ready(session) if self._hooks.has("on_session_end") else None
        if slot is not None:
            self._fire(session, "on_session_end", completed=False, interrupted=True,
                       **self._ended(user_message, slot, session))
        self._book.landed(user_message, session)

    def _ended(self, user_message: Message, slot: Slot, session: Session) -> dict[str, Any]:
        """What Hermes passes about the turn of ``user_message`` at its end: its own turn's
        identity, taken when it started (by then the next turn may have begun), in the session
        it ends in (a compaction during the turn moved it on)."""
        taken = self._book.identity(user_message)
        if taken is None:  # its prefetch never came
            return self._turn(slot, session)
        return {**taken, "session_id": session.id}

    @hookimpl
    def on_pre_compress(self, messages: list[Message], session: Session) -> str | None:
        slot = self._ready(session, move=False)
        if slot is None:
            return None
        # kept for the end Hermes gives the session when the compaction moves it on (below):
        # by session, since the lane may still be behind an earlier compaction's switch
        history = to_openai(messages)
        slot.compacted[session.id] = history  # (the lane pops it: single dict operations)
        trim(slot.compacted, 4)  # compactions that made no progress leave theirs
        fn = getattr(slot.obj, "on_pre_compress", None)
        if not callable(fn):
            return None
        return self._text(slot.call(fn, history), "on_pre_compress")

    @hookimpl
    def on_session_switch(self, new_session: Session, old_session: Session | None,
                          reason: SwitchReason) -> None:
        slot = self._slot(new_session)
        with self._book.switched:  # a new session's messages all reach on_message
            slot.start_seen(new_session.id, whole=reason in (
                SwitchReason.NEW, SwitchReason.RESET, SwitchReason.COMPRESSION))
            self._book.switched.notify_all()
        with slot.lock:
            compacted = (slot.compacted.pop(old_session.id, None)
                         if reason == SwitchReason.COMPRESSION and old_session is not None
                         else None)
            if slot.session_id is not None and slot.session_id != new_session.id:
                if compacted is not None and old_session is not None and \
                        old_session.id == slot.session_id:
                    # as Hermes before a compaction moves the conversation on: the old
                    # session's end, with the history the compaction summarised (one that
                    # raises is reported: the switch still happens)
                    self._call_reported(slot, "on_session_end", compacted)
                parent = old_session.id if old_session is not None else slot.session_id
                self._switch(slot, new_session, parent, reason=_HERMES_REASON.get(reason, ""),
                             reset=reason in (SwitchReason.NEW, SwitchReason.RESET))
        # otherwise initialised lazily, or already moved by the new session's first hook
        if reason == SwitchReason.RESET or (reason == SwitchReason.NEW and old_session is not None):
            self._fire(new_session, "on_session_reset", observe=True, session_id=new_session.id,
                       platform=new_session.platform, reason="new_session")
        if reason == SwitchReason.NEW:  # a brand-new session: not a resume, not a compaction
            self._fire(new_session, "on_session_start", observe=True, session_id=new_session.id,
                       model=new_session.model or "", platform=new_session.platform)
        if reason == SwitchReason.DELEGATION:
            self._children[new_session.id] = time.monotonic()

    @hookimpl
    def on_session_end(self, session: Session, messages: list[Message], reason: EndReason) -> None:
        self._book.forget(session.id)  # a last message whose prefetch never came
        if session.agent_context != "primary":
            self._drop(session)  # a child's turns are not the user's: no on_session_end
            return
        if reason == EndReason.NEW_SESSION and not messages:
            return  # as Hermes: /new on an empty session ends nothing (only the switch comes)
        slot_key = self._slot_key(self._key(session), session)
        known = self._slots.get(slot_key)
        if known is None:
            return  # no object was ever made for it: nothing of the session reached one
        with known.lock:
            if known.session_id is None:
                return  # never initialised: nothing of the session reached it
        # still in this session: the next one's hooks on the turn's thread do not move it (its
        # switch is queued after this end); another conversation's writes may have (shared)
        slot = self._ready(session)
        if slot is None:
            return
        fn = getattr(slot.obj, "on_session_end", None)
        if callable(fn):
            slot.call(fn, to_openai(messages))
        self._fire(session, "on_session_finalize", session_id=session.id,
                   platform=session.platform,
                   reason="session_boundary" if reason == EndReason.NEW_SESSION else "shutdown")
        if reason != EndReason.NEW_SESSION and slot_key != self._key(session):
            # the conversation's agent is gone (closed, expired, shut down): its object with it,
            # as Hermes' gateway shuts an evicted agent's providers down
            self._drop(session)

    def _drop(self, session: Session) -> None:
        """Shut down and forget the Hermes object of ``session``'s slot (a delegated child's, or
        a conversation's whose agent ended); one for it is made again if it comes back."""
        slot_key = self._slot_key(self._key(session), session)
        with self._lock:
            slot = self._slots.pop(slot_key, None)
            # its sessions are forgotten with it (a gateway's run of many conversations)
            for sid in [sid for sid, (key, _s) in self._served.items() if key == slot_key]:
                del self._served[sid]
        if slot is not None:
            self._close(slot)

    def _close(self, slot: Slot) -> None:
        """``shutdown()`` on the slot's object, then its thread ends. Also on an object whose
        initialize raised: it may have started threads or opened files first, and Hermes shuts
        every provider down. One that raises is reported; the other objects still close."""
        try:
            if slot.session_id is not None or slot.failure is not None:
                self._call_reported(slot, "shutdown")
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
        parent.call(fire, self._hooks, "subagent_start", self._problem, **start_kwargs(
            child, goal, f"{child.parent_session_id}:{parent.turns_of(child.parent_session_id or '')}",
            parent.agent_context == "subagent", self.context.config.delegation.max_depth))

    @hookimpl
    def on_delegation(self, task: str, result: str, child_session_id: str, status: str,
                      session: Session) -> None:
        started = self._children.pop(child_session_id, None)
        slot = self._ready(session, move=False)
        if slot is None:
            return
        fn = getattr(slot.obj, "on_delegation", None)
        if callable(fn):
            slot.call(call_with, fn, task, delegated_result(result, status),
                      child_session_id=child_session_id)
        ms = int((time.monotonic() - started) * 1000) if started is not None else 0
        self._fire(session, "subagent_stop", move=False, **stop_kwargs(
            session, child_session_id, result, status, f"{session.id}:{slot.turns_of(session.id)}", ms,
            self.context.config.delegation.max_depth))

    @hookimpl
    def on_memory_write(self, write: MemoryWrite) -> None:
        """To the object of the conversation that wrote (as Hermes mirrors a write to the
        providers of the agent that made it), whichever session it is in now; never to another
        conversation's or user's. A write from no session (a command) reaches the one object
        when there is only one and memory is not per user; any other goes nowhere, said once."""
        writer: Session | None = None
        with self._lock:
            if write.session_id is not None and write.session_id in self._served:
                slot_key, writer = self._served[write.session_id]
                slot = self._slots.get(slot_key)
            else:
                primary = [s for s in self._slots.values() if s.agent_context == "primary"]
                one = write.session_id is None and len(primary) == 1 and not self._user_scope
                slot = primary[0] if one else None
        if slot is None or slot.session_id is None:
            if write.session_id is not None:
                self._problem("a memory write of a session it never served (or whose object "
                              "has ended) was not passed to it")
            return
        fn = getattr(slot.obj, "on_memory_write", None)
        if callable(fn):
            slot.call(call_with, fn, write.action, write.target, write.content,
                      metadata=write_metadata(write, writer))

    @hookimpl
    def shutdown(self) -> None:
        LIVE.discard(self)
        for slot in list(self._slots.values()):
            self._close(slot)
        with calls.in_home(calls.hermes_home_for(self.context.home, self.candidate.plugin, None)):
            unload(self._loaded, self._problem)


def memory_class(candidate: HermesCandidate) -> type[HermesMemoryProvider]:
    """A hermes-core provider class named ``candidate.name`` for one Hermes plugin."""
    return bridged_class(HermesMemoryProvider, "Hermes_", "memory provider", candidate)


