"""The kernel's :class:`~hermes_core.types.Dispatcher`: conversation keys to agents.

A platform adapter (the terminal, the webhook, a chat service) hands every incoming message to a
:class:`ConversationDispatcher`. Each ``(platform, conversation_key)`` is one conversation, served
by one :class:`~hermes_core.agent.Agent` over the shared :class:`~hermes_core.host.PluginHost`:

* **Resume.** The first time a key is seen in this process, the dispatcher asks the memory
  providers for the stored conversation (the ``load_session`` hook, answered by the session
  archive) and builds the agent from it, so a conversation survives restarts. A new conversation
  stores its key in ``Session.attributes["conversation_key"]``, which is what the next lookup finds.
* **Order.** Turns of one conversation run one at a time in arrival order (a ticket queue, because
  a plain lock wakes waiters in no particular order); different conversations run in parallel.
* **Bounded.** At most ``max_agents`` agents stay live. When another is needed, the conversation
  idle longest is closed (``on_session_end`` with reason ``expired``; its worker drained); it is
  resumed from the archive when it speaks again. ``sweep`` closes those idle past ``idle_seconds``.
* **Many nodes.** With ``storage.url`` set (one PostgreSQL database shared by several ``serve``
  processes), each turn holds the conversation's advisory lock in the database, loads the
  conversation from the archive under it and closes its agent afterwards (reason ``expired``), so
  the next turn, on whichever node, starts from the one stored history.
* **Failures stay inside.** A turn that cannot produce a reply (the LLM is down, the stored
  conversation cannot be read) raises :class:`TurnFailed`, a clear message for the platform to pass
  on; the dispatcher and the other conversations are unaffected.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._slots import Slot, shared_locks
from .agent import Agent, TurnResult
from .errors import HermesCoreError, NotStored
from .types import EndReason, IncomingMessage, Message, Session
from .users import USER_ATTRIBUTE, session_user

if TYPE_CHECKING:
    from .host import PluginHost
    from .llm import ChatLLM

__all__ = [
    "DEFAULT_MAX_AGENTS",
    "RESERVED_ATTRIBUTES",
    "ConversationDispatcher",
    "Gate",
    "TurnAnswered",
    "TurnFailed",
    "connect_platform",
    "disconnect_platform",
    "load_stored_session",
]

log = logging.getLogger("hermes_core.dispatch")
T = TypeVar("T")

#: live agents a dispatcher keeps by default; each holds a worker thread and its history in memory
DEFAULT_MAX_AGENTS = 64
#: session attributes the kernel sets itself; a message's own attributes cannot set them
RESERVED_ATTRIBUTES = frozenset({USER_ATTRIBUTE, "conversation_key"})
#: how long ``close`` waits for one conversation's running turn before leaving it
CLOSE_WAIT_SECONDS = 30.0


class TurnAnswered(HermesCoreError):
    """A :data:`Gate` answered the message itself (say, a retry of a message already answered):
    no turn ran; ``answer`` is the gate's, for the platform to send."""

    def __init__(self, answer: Any) -> None:
        super().__init__("the message was answered without a turn")
        self.answer = answer


class TurnFailed(HermesCoreError):
    """A turn produced no reply. ``failure`` classifies it (an :class:`~hermes_core.llm.LLMFailure`
    value, ``"load"``, ``"store"`` (the message could not be stored: send it again),
    ``"closed"``, ``"invalid_key"``, ``"user_mismatch"`` (the conversation belongs to another user
    key) or ``"internal"``); ``transient`` says a retry may succeed."""

    def __init__(self, message: str, *, conversation_key: str, failure: str,
                 transient: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.conversation_key = conversation_key
        self.failure = failure
        self.transient = transient
        self.status = status


#: A platform's check that runs in the conversation's place in line (under its cross-node lock
#: with shared storage), before the turn: it raises :class:`TurnAnswered` (or
#: :class:`TurnFailed`) to answer without a turn, or returns the callback told how the turn ended
#: (its result, or ``None`` when it failed), called before the place in line is given up. The
#: webhook's idempotent delivery is one: no two nodes can run the same message at once.
Gate = Callable[[], Callable[[TurnResult | None], None]]


def load_stored_session(host: PluginHost, platform: str, conversation_key: str | None,
                        session_id: str | None = None) -> tuple[Session, list[Message]] | None:
    """Ask the providers for a stored session (``load_session``); the first valid answer wins.

    Raises :class:`TurnFailed` when a provider fails or answers nonsense: starting afresh instead
    would fork the conversation, and its stored history would silently stop being used.
    """
    value, outcomes = host.hooks.load_session(platform=platform, conversation_key=conversation_key,
                                              session_id=session_id)
    what = conversation_key or session_id or f"the latest {platform} session"
    for outcome in outcomes:
        if outcome.status == "bad_return":
            raise TurnFailed(
                f"plugin {outcome.plugin}: load_session {outcome.error}; the conversation was not "
                "started", conversation_key=conversation_key or "", failure="load")
        if not outcome.ok:
            cause = (f"raised {type(outcome.error).__name__}: {outcome.error}"
                     if outcome.error is not None else "did not answer within its deadline "
                     "(hooks.timeouts.load_session)")
            raise TurnFailed(
                f"cannot load the stored conversation {what!r}: plugin {outcome.plugin} {cause}. "
                "Nothing was changed; fix the archive ('hermes-core doctor') and retry",
                conversation_key=conversation_key or "", failure="load")
    if value is None:
        return None
    return value[0], list(value[1])


class ConversationDispatcher:
    """Serves conversations over one host; see the module docstring.

    ``llm`` is shared by every conversation (the anthropic client is thread-safe). Build one with
    :meth:`open`, which also activates the configured memory providers and context engine.
    """

    def __init__(self, host: PluginHost, llm: ChatLLM, *, max_agents: int = DEFAULT_MAX_AGENTS,
                 idle_seconds: float | None = None, max_concurrent_turns: int | None = None,
                 agent_options: dict[str, Any] | None = None) -> None:
        if max_agents < 1:
            raise ValueError(f"max_agents must be at least 1, got {max_agents}")
        if max_concurrent_turns is not None and max_concurrent_turns < 1:
            raise ValueError(f"max_concurrent_turns must be at least 1, got {max_concurrent_turns}")
        self.host = host
        self.llm = llm
        self.max_agents = max_agents
        self.idle_seconds = idle_seconds
        #: extra keyword arguments for every Agent (e.g. ``on_notice`` from a terminal front end)
        self.agent_options = dict(agent_options or {})
        #: the connected platform that delivers agent-initiated messages (``send``), if any
        self.platform_key: str | None = None
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, str], Slot] = {}
        self._closed = False
        # Bounds the turns running at once (LLM calls, tools); taken after the conversation's
        # ticket, so a conversation waiting for capacity keeps its place in line.
        self._running = (threading.BoundedSemaphore(max_concurrent_turns)
                         if max_concurrent_turns else None)
        #: agents closed to make room or because they idled (for tests and ``stats``)
        self.evictions = 0
        #: cross-node turn locks when the storage is shared (storage.url); None on one node
        self._locks = shared_locks(host)

    @classmethod
    def open(cls, host: PluginHost, llm: ChatLLM | None = None, **kwargs: Any) -> ConversationDispatcher:
        """Activate what the config selects (once per host) and build a dispatcher; ``llm``
        defaults to the model client ``llm.client`` selects (:meth:`PluginHost.llm`)."""
        core = host.config.core
        host.activate_memory_providers()  # once per host: what is active already is kept
        if host.engine is None:
            host.activate("context-engine", core.context.engine, config_key="context.engine")
        return cls(host, llm if llm is not None else host.llm("main"), **kwargs)

    # ------------------------------------------------------------------------ the Dispatcher

    def handle(self, message: IncomingMessage) -> str:
        """Run one turn of ``message``'s conversation and return the reply."""
        return self.run(message).reply

    def stream(self, message: IncomingMessage, *, gate: Gate | None = None) -> Iterator[str]:
        """Run one turn and yield the reply's text as the model produces it.

        The turn takes its place in the conversation's queue now (not on the first ``next``) and
        runs on a thread of the host's executor; a consumer that stops early does not stop the
        turn, whose reply is archived all the same. A failure is raised as :class:`TurnFailed`
        from the iterator.
        """
        slot, ticket = self._checkout(message.platform, message.conversation_key)
        items: queue.Queue[str | TurnResult | BaseException] = queue.Queue()

        def work() -> None:
            try:
                items.put(self._serve(slot, ticket, message, items.put, gate))
            except BaseException as exc:  # handed to the consumer, raised there
                items.put(exc)

        if not self.host.hooks.engine.lanes.runners.submit(work):  # the host was shut down
            items.put(RuntimeError("the plugin host is shut down; no turn can run"))
        return self._drain(items)

    @staticmethod
    def _drain(items: queue.Queue[str | TurnResult | BaseException]) -> Iterator[str]:
        while True:
            item = items.get()
            if isinstance(item, str):
                yield item
            elif isinstance(item, TurnResult):
                if item.streamed_chars == 0 and item.reply:
                    yield item.reply  # nothing streamed (e.g. the budget note): send it whole
                return
            else:
                raise item

    # ------------------------------------------------------------------------- library API

    def run(self, message: IncomingMessage,
            on_text: Callable[[str], None] | None = None, *, gate: Gate | None = None
            ) -> TurnResult:
        """Run one turn and return everything it did (``handle`` is this, reply only); ``gate``
        runs in the conversation's place in line first (see :data:`Gate`)."""
        slot, ticket = self._checkout(message.platform, message.conversation_key)
        return self._serve(slot, ticket, message, on_text, gate)

    def call(self, platform: str, conversation_key: str, fn: Callable[[Agent], T]) -> T:
        """Run ``fn(agent)`` in the conversation's place in line: how a front end runs
        ``/compress`` or ``/new`` without racing the conversation's turns."""
        slot, ticket = self._checkout(platform, conversation_key)
        try:
            slot.wait_turn(ticket)
            return fn(self._agent(slot, IncomingMessage(platform, conversation_key, "")))
        finally:
            self._checkin(slot)

    def resume_latest(self, platform: str) -> str | None:
        """Bind the session used last on ``platform`` to its conversation key and return the key
        (``chat --continue``); ``None`` when the platform has no stored session."""
        loaded = load_stored_session(self.host, platform, None)
        if loaded is None:
            return None
        session, history = loaded
        key = str(session.attributes.get("conversation_key") or f"session:{session.id}")
        slot, ticket = self._checkout(platform, key)
        try:
            slot.wait_turn(ticket)
            if slot.agent is None:
                self._make_room()
                slot.agent = self._build(platform, key, loaded=(session, history))
                slot.generation = self.host.erasures_seen
        finally:
            self._checkin(slot)
        return key

    def agent_of(self, platform: str, conversation_key: str) -> Agent | None:
        """The live agent of a conversation, if any (read-only use: it may be mid-turn)."""
        with self._lock:
            slot = self._slots.get((platform, conversation_key))
            return slot.agent if slot is not None else None

    def pending(self, platform: str, conversation_key: str) -> int:
        """Turns of a conversation running or waiting (a front end may refuse more)."""
        with self._lock:
            slot = self._slots.get((platform, conversation_key))
            return slot.users if slot is not None else 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            live = sum(1 for s in self._slots.values() if s.agent is not None)
            busy = sum(1 for s in self._slots.values() if s.users)
            return {"live_agents": live, "busy_conversations": busy, "evictions": self.evictions,
                    "max_agents": self.max_agents}

    def sweep(self, now: float | None = None) -> int:
        """Close agents idle for more than ``idle_seconds``; returns how many were closed."""
        if self.idle_seconds is None:
            return 0
        cutoff = (time.monotonic() if now is None else now) - self.idle_seconds
        with self._lock:
            victims = [s for s in self._slots.values()
                       if s.agent is not None and not s.users and s.last_used < cutoff]
            claimed = [(s, self._claim(s)) for s in victims]
        for slot, ticket in claimed:
            self._evict(slot, ticket)
        return len(claimed)

    def close(self, reason: EndReason = EndReason.SHUTDOWN, *,
              wait: float = CLOSE_WAIT_SECONDS) -> None:
        """Refuse new turns, let running ones finish (up to ``wait`` seconds each), close every
        agent (``on_session_end``, workers drained). The host is left to its owner."""
        with self._lock:
            self._closed = True
            claimed = [(s, self._claim(s)) for s in self._slots.values()]
        for slot, ticket in claimed:
            if not slot.wait_turn(ticket, timeout=wait):
                log.warning("conversation %r still busy after %.0f s; closing without it",
                            slot.key, wait)
                self._release(slot)
                continue
            try:
                if slot.agent is not None:
                    slot.agent.close(reason, shutdown_host=False)
                    slot.agent = None
            except Exception as exc:  # one conversation's failure must not stop the others
                log.error("closing conversation %r: %s: %s", slot.key, type(exc).__name__, exc)
            finally:
                slot.done()
                self._release(slot)

    # ---------------------------------------------------------------------------- plumbing

    def _checkout(self, platform: str, key: str) -> tuple[Slot, int]:
        """Take a ticket in the conversation's queue (creating its slot)."""
        if not isinstance(key, str) or not key:
            raise TurnFailed("a conversation key must be a non-empty string", conversation_key="",
                             failure="invalid_key")
        with self._lock:
            if self._closed:
                raise TurnFailed("the dispatcher is shutting down; retry in a moment",
                                 conversation_key=key, failure="closed", transient=True)
            slot = self._slots.get((platform, key))
            if slot is None:
                slot = self._slots[(platform, key)] = Slot(platform, key)
            return slot, self._claim(slot)

    def _claim(self, slot: Slot) -> int:
        # called with self._lock held
        slot.users += 1
        ticket = slot.next_ticket
        slot.next_ticket += 1
        return ticket

    def _checkin(self, slot: Slot) -> None:
        slot.last_used = time.monotonic()
        slot.done()
        self._release(slot)

    def _release(self, slot: Slot) -> None:
        with self._lock:
            slot.users -= 1
            if not slot.users and slot.agent is None:
                self._slots.pop((slot.platform, slot.key), None)

    def _serve(self, slot: Slot, ticket: int, message: IncomingMessage,
               on_text: Callable[[str], None] | None, gate: Gate | None = None) -> TurnResult:
        from .llm import LLMError

        key = message.conversation_key
        try:
            slot.wait_turn(ticket)
            if self._running is not None:
                self._running.acquire()
            try:
                with self._node_lock(slot):
                    finish = gate() if gate is not None else None
                    result: TurnResult | None = None
                    try:
                        if self._locks is not None:  # an agent left by call(): it may be stale
                            self._retire(slot)
                        self._heed_erasures(slot)
                        agent = self._agent(slot, message)
                        _check_owner(agent, message)
                        result = agent.run_turn(message.text, on_text=on_text,
                                                message_id=message.message_id)
                        return result
                    finally:
                        if finish is not None:
                            finish(result)
                        if self._locks is not None:  # the next turn may run on another node
                            self._retire(slot)
            except LLMError as exc:
                raise TurnFailed(f"the model call failed ({exc.failure.value}): {exc}",
                                 conversation_key=key, failure=exc.failure.value,
                                 transient=exc.transient, status=exc.status) from exc
            except (TurnFailed, TurnAnswered):
                raise
            except NotStored as exc:  # the conversation's store did not take the message
                raise TurnFailed(str(exc), conversation_key=key, failure="store",
                                 transient=True) from exc
            except Exception as exc:
                log.error("conversation %r: the turn raised %s: %s", key, type(exc).__name__, exc,
                          exc_info=True)
                raise TurnFailed(f"the turn failed: {type(exc).__name__}: {exc}",
                                 conversation_key=key, failure="internal") from exc
            finally:
                if self._running is not None:
                    self._running.release()
        finally:
            self._checkin(slot)

    def _heed_erasures(self, slot: Slot) -> None:
        """Before a turn: when something was erased from the stores since the slot's agent was
        built (``forget``, ``memory rollback``, ``sessions delete``, from any process or node),
        drop the agent, whose history and frozen prompt may still hold it; the turn then runs on
        an agent rebuilt from the stores (the plugins heard ``on_erasure`` first)."""
        generation = self.host.heed_erasures()
        if generation is None:
            return
        if slot.agent is not None and slot.generation != generation:
            agent, slot.agent = slot.agent, None
            log.info("conversation %r: rebuilt from the stores after an erasure", slot.key)
            try:
                agent.discard()
            except Exception as exc:
                log.error("dropping conversation %r after an erasure: %s: %s", slot.key,
                          type(exc).__name__, exc)
        slot.generation = generation

    def _node_lock(self, slot: Slot) -> Any:
        """The conversation's lock across nodes (shared storage), or nothing on one node."""
        if self._locks is None:
            return contextlib.nullcontext()
        return _held(self._locks, slot)

    def _retire(self, slot: Slot) -> None:
        """Close the slot's agent after a turn (shared storage): its writes are drained before
        the cross-node lock is released, and the next turn loads the stored conversation."""
        agent, slot.agent = slot.agent, None
        if agent is not None:
            try:
                agent.close(EndReason.EXPIRED, shutdown_host=False)
            except Exception as exc:
                log.error("closing conversation %r after its turn: %s: %s", slot.key,
                          type(exc).__name__, exc)

    def _agent(self, slot: Slot, message: IncomingMessage) -> Agent:
        """The slot's agent, built (resumed from the archive when stored) on first use."""
        if slot.agent is None:
            self._make_room()
            loaded = load_stored_session(self.host, slot.platform, slot.key)
            slot.agent = self._build(slot.platform, slot.key, loaded=loaded, message=message)
            slot.generation = self.host.erasures_seen
        return slot.agent

    def _build(self, platform: str, key: str, *, loaded: tuple[Session, list[Message]] | None,
               message: IncomingMessage | None = None) -> Agent:
        if loaded is not None:
            session, history = loaded
            session.attributes.setdefault("conversation_key", key)
            resumed = Agent(self.host, self.llm, session=session, history=history,
                            platform=platform, **self.agent_options)
            self._deliver_notices(resumed, key)
            return resumed
        agent = Agent(self.host, self.llm, platform=platform, **self.agent_options)
        self._deliver_notices(agent, key)
        # Set before the first turn: the archive stores the attributes with the session's row.
        attributes = agent.session.attributes
        if message is not None:
            # the user key and the conversation key are the kernel's, not free attributes: an
            # attribute named like them would bind the conversation to a user nobody sent
            attributes.update({k: v for k, v in message.attributes.items()
                               if k not in RESERVED_ATTRIBUTES})
            if message.user_id is not None:
                attributes["user_id"] = message.user_id
        attributes["conversation_key"] = key
        return agent

    def _deliver_notices(self, agent: Agent, key: str) -> None:
        """Notices that arrive between turns (a background review's "memory updated") go to the
        platform through ``send`` when it can deliver them and the front end took no callback."""
        if self.platform_key is None or "on_notice" in self.agent_options:
            return
        def deliver(text: str) -> None:
            self.send(key, text)

        agent.on_notice = deliver

    def send(self, conversation_key: str, text: str) -> bool:
        """Deliver ``text``, a message the agent starts itself, to ``conversation_key`` through
        the connected platform's ``send`` hook; False (the problem is logged and recorded as a
        hook problem) when it could not."""
        if self.platform_key is None:
            log.warning("no connected platform can deliver a message to %r: %r was not sent",
                        conversation_key, text[:80])
            return False
        outcomes = self.host.hooks.send(conversation_key=conversation_key, text=text,
                                        only=self.platform_key)
        return bool(outcomes) and all(o.ok for o in outcomes)

    def _make_room(self) -> None:
        """Close the least recently used idle agents until one more fits."""
        with self._lock:
            live = [s for s in self._slots.values() if s.agent is not None]
            excess = len(live) + 1 - self.max_agents
            idle = sorted((s for s in live if not s.users), key=lambda s: s.last_used)
            claimed = [(s, self._claim(s)) for s in idle[:max(0, excess)]]
        if excess > len(claimed):
            log.warning("%d conversations are busy; running over max_agents=%d for now",
                        len(live), self.max_agents)
        for slot, ticket in claimed:
            self._evict(slot, ticket)

    def _evict(self, slot: Slot, ticket: int) -> None:
        slot.wait_turn(ticket)
        try:
            if slot.agent is not None:
                slot.agent.close(EndReason.EXPIRED, shutdown_host=False)
                slot.agent = None
                with self._lock:
                    self.evictions += 1
        except Exception as exc:
            log.error("closing idle conversation %r: %s: %s", slot.key, type(exc).__name__, exc)
            slot.agent = None
        finally:
            slot.done()
            self._release(slot)


def _check_owner(agent: Agent, message: IncomingMessage) -> None:
    """Refuse a message for a conversation that belongs to another user key: its history would
    be the model's context for this sender. A conversation stored without a user key (before
    ``memory.scope: user``) takes any sender, as it did."""
    owner = session_user(agent.session)
    if owner is None or message.user_id == owner:
        return
    if message.user_id is None:
        raise TurnFailed(
            f"conversation {message.conversation_key!r} belongs to a user key and this message "
            "names none; send the conversation's user key with every message",
            conversation_key=message.conversation_key, failure="user_mismatch")
    raise TurnFailed(
        f"conversation {message.conversation_key!r} belongs to another user key; send this "
        "user's messages under a conversation key of their own",
        conversation_key=message.conversation_key, failure="user_mismatch")


@contextlib.contextmanager
def _held(locks: Any, slot: Slot) -> Iterator[None]:
    from .storage import StorageConnectError, StorageError

    try:
        cm = locks.hold(slot.platform, slot.key)
        cm.__enter__()
    except StorageError as exc:  # the database is unreachable ("store") or refused the lock
        raise TurnFailed(f"cannot take the conversation's turn lock: {exc}",
                         conversation_key=slot.key, transient=True,
                         failure="store" if isinstance(exc, StorageConnectError) else "load",
                         ) from exc
    try:
        yield
    except BaseException:
        if not cm.__exit__(*sys.exc_info()):
            raise
    else:
        cm.__exit__(None, None, None)


# ------------------------------------------------------------------------------- front ends


def connect_platform(host: PluginHost, name: str, *, llm: ChatLLM | None = None,
                     configure: Callable[[Any], None] | None = None) -> tuple[Any, ConversationDispatcher]:
    """Start platform ``name``: activate it, build the dispatcher, call its ``connect``.

    ``configure(instance)`` runs before ``connect`` (command-line overrides). An adapter built on
    :class:`~hermes_core.kinds.Platform` sizes the dispatcher with its ``dispatcher_options()``. A
    ``connect`` that raises is re-raised here (a :class:`~hermes_core.errors.HermesCoreError` as
    it is, anything else as a :class:`~hermes_core.errors.PluginError` naming the plugin), after
    the dispatcher is closed, so a front end that fails to start leaves nothing running.
    """
    from .errors import PluginError

    instance = host.activate("platform", name, config_key=name)
    if configure is not None:
        configure(instance)
    from .kinds import Platform

    options = instance.dispatcher_options() if isinstance(instance, Platform) else {}
    dispatcher = ConversationDispatcher.open(host, llm, **options)
    key = host.pm.get_name(instance)
    assert key is not None, "an activated platform is registered"
    for outcome in host.hooks.connect(dispatcher=dispatcher, only=key):
        if not outcome.ok:
            dispatcher.close(wait=0)
            host.deactivate(instance)
            if isinstance(outcome.error, HermesCoreError):
                raise outcome.error
            cause = (f"{type(outcome.error).__name__}: {outcome.error}" if outcome.error is not None
                     else "connect did not return within hooks.timeouts.connect")
            raise PluginError(f"platform {name!r} failed to start: {cause}") from outcome.error
    if isinstance(instance, Platform) and instance.can_send():
        dispatcher.platform_key = key
    return instance, dispatcher


def disconnect_platform(host: PluginHost, instance: Any, dispatcher: ConversationDispatcher,
                        reason: EndReason = EndReason.SHUTDOWN) -> None:
    """Stop a platform started by :func:`connect_platform`: ``disconnect`` (in-flight requests
    finish), then close every conversation; the host itself is left to its owner."""
    key = host.pm.get_name(instance)
    if key is not None:
        host.hooks.disconnect(only=key)
    dispatcher.close(reason)
