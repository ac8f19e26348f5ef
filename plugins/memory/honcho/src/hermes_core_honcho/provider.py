"""The Honcho memory provider: the kernel's memory hooks mapped onto the Honcho v3 API.

Mapping: one Honcho *workspace* (``honcho.workspace``); the user and the agent are two *peers*
(``user_peer``, ``ai_peer``), the agent observing the user; every hermes-core session is one Honcho
*session* with the same id (sanitised if needed), created with its lineage in its metadata
(``parent_session_id``, ``switch_reason``), so a compaction's child session is a new Honcho session
that says where it came from.

With ``memory.scope: user`` every user key (``session.user_id``) is a peer of its own
(:func:`.config.user_peer_id`): a session's user messages are written as that peer, recall and
the tools read that peer's model, card and conclusions, and searches see only the sessions that
peer is in - so one user's facts are never recalled for another. A session without a user key uses
``user_peer``, as in the global scope (which keeps one user peer for everyone).

Nothing here touches the network on the turn's thread except the tools the model calls:

* every write is a *job* (a JSON object) kept first in the outbox (``honcho/outbox.jsonl``, a
  :class:`hermes_core.storage.spool.Courier`), then sent in order. ``sync_turn`` runs on the
  provider's own lane (the kernel queues it there), so it sends at once, on that lane; a session
  boundary and a mirrored note are sent on the provider's background lane (``run_later``). A job
  that fails for a reason that may pass (Honcho unreachable, busy, answering junk) is tried once
  more after ``retry_delay`` (longer if the server sent ``Retry-After``) and then waits in the
  outbox: while Honcho is failing, writes are only kept, and one background attempt at a time
  sends the outbox; the next start sends what is left. A job the server *rejects* (a 4xx other
  than 429) is logged and kept in ``honcho/rejected.jsonl`` for a person to look at;
* ``queue_prefetch`` asks for new recall (:mod:`.recall`), prepared on the provider's disposable
  lane for the conversation (``run_later(kind="disposable")``: the kernel's shutdown does not wait
  for it), and ``prefetch`` returns what it prepared. Requests for a session coalesce: one
  refresh at a time per session, for the newest query. Only the first prefetch of a session,
  which has nothing prepared yet, waits for it, at most ``first_turn_wait`` seconds and always
  less than the kernel's ``memory.prefetch_timeout``. The provider starts no thread of its own.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings
from datetime import UTC, datetime
from typing import Any

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.storage.spool import Courier, Delivery, Spool
from hermes_core.types import ForgetReport, MemoryWrite, Message, Session, SwitchReason

from .chunking import split_message
from .client import HonchoClient, HonchoError, HonchoRejected, HonchoUnavailable
from .config import HonchoConfig, session_id_for, user_peer_id
from .recall import Layer, RecallState, base_text, is_trivial, render

__all__ = ["HonchoProvider"]

log = logging.getLogger("hermes_core.plugins.honcho")

Job = dict[str, Any]
#: messages per request (and so per job: a retry resends one job whole)
BATCH = 100


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


class HonchoProvider(MemoryProvider):
    """Recall of the user from Honcho, turn storage, profile mirroring and the honcho_* tools."""

    name = "honcho"
    Config = HonchoConfig
    description = "Honcho (v3) user modelling: cross-session recall, turn storage, honcho_* tools"

    config: HonchoConfig

    def __init__(self, config: HonchoConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.user, self.ai = config.user_peer, config.ai_peer
        #: ``memory.scope: user``: one Honcho peer per user key
        self.per_user = getattr(getattr(context.config, "memory", None), "scope", "global") == "user"
        self.client = HonchoClient(config.base_url, workspace=config.workspace,
                                   api_key=config.api_key_value(), timeout=config.timeout)
        # The first prefetch must answer inside the kernel's deadline, whatever the config says.
        self.first_turn_wait = min(config.first_turn_wait, 0.8 * context.config.memory.prefetch_timeout)
        self._lock = threading.Lock()
        self._states: dict[str, RecallState] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._ready: set[str] = set()  # Honcho sessions known to exist
        self._peers: set[str] = set()  # peers known to exist (the AI peer, user peers)
        self._current: str | None = None
        folder = context.home / "honcho"
        self.rejected = Spool(folder / "rejected.jsonl")
        self.outbox = Courier(Spool(folder / "outbox.jsonl"), self._perform,
                              run_later=context.run_later,
                              # a write cut by the client closing at shutdown is not refused:
                              # it waits in the outbox for the next start
                              refused=lambda exc: not self._stopped and _refused(exc),
                              rejected=self.rejected, attempts=2,
                              pause=self._retry_pause, report=self._delivered,
                              label="honcho: send the outbox")
        self._down_since: float | None = None
        self._refresh_cond = threading.Condition()
        #: per Honcho session: the newest refresh asked for and not started yet
        self._pending: dict[str, dict[str, Any]] = {}
        #: Honcho sessions with a refresh job queued or running on the disposable lane
        self._refreshing: set[str] = set()
        self._stopped = False
        self._reads_down_since: float | None = None
        if self.outbox.spool.has_pending():
            log.info("honcho: sending %d job(s) kept in %s", len(self.outbox.spool),
                     self.outbox.spool.path)
            self.outbox.later()
        from .tools import build_tools

        self._tools = build_tools(self) if config.recall_mode != "context" else []

    # ------------------------------------------------------------------------------ sessions

    @property
    def current_session(self) -> str | None:
        """The Honcho session of the last session switch, if any."""
        return self._current

    def session_id(self, session: Session | str) -> str:
        """The Honcho session id of a hermes-core session (or session id)."""
        raw = session if isinstance(session, str) else session.id
        return session_id_for(raw, self.config.session_prefix)

    def peer_of_user(self, user: str | None) -> str:
        """The peer of a user key: its own with ``memory.scope: user``, else ``user_peer``."""
        if not self.per_user or not user:
            return self.user
        return user_peer_id(user, self.config.user_peer_prefix)

    def peer_for(self, session: Session | None) -> str:
        """The user peer of ``session`` (see :meth:`peer_of_user`)."""
        return self.peer_of_user(session.user_id if session is not None else None)

    def peer_of_session(self, sid: str) -> str | None:
        """The user peer of a Honcho session this provider has seen, else None."""
        with self._lock:
            meta = self._meta.get(sid)
        if meta is None:
            return None
        peer = meta.get("user_peer")
        return peer if isinstance(peer, str) else self.user

    def _remember(self, session: Session, reason: str | None = None) -> str:
        sid = self.session_id(session)
        with self._lock:
            meta = self._meta.setdefault(sid, {"hermes_session_id": session.id,
                                               "platform": session.platform})
            if self.per_user:  # the global scope's metadata stays as it was
                meta.setdefault("user_peer", self.peer_for(session))
            if session.parent_session_id:
                meta["parent_session_id"] = session.parent_session_id
                meta["parent_honcho_session_id"] = self.session_id(session.parent_session_id)
            if reason:
                meta["switch_reason"] = reason
        return sid

    def _state(self, sid: str) -> RecallState:
        with self._lock:
            state = self._states.get(sid)
            if state is None:
                cfg = self.config
                state = self._states[sid] = RecallState(
                    Layer(cfg.context_cadence, cfg.max_backoff),
                    Layer(cfg.dialectic_cadence, cfg.max_backoff))
            return state

    def ensure_session(self, sid: str, *, timeout: float | None = None) -> None:
        """Get-or-create the workspace, both peers (once) and the session ``sid`` (once).

        ``timeout`` never had an effect (the client's own timeouts apply); passing it warns and
        it goes in 0.3."""
        if timeout is not None:
            warnings.warn("HonchoProvider.ensure_session(timeout=...) has no effect and goes in "
                          "0.3: leave it out (the client's timeouts apply)", DeprecationWarning,
                          stacklevel=2)
        if sid in self._ready:
            return
        user = self.peer_of_session(sid) or self.user
        self.ensure_peers(user)
        with self._lock:
            meta = dict(self._meta.get(sid) or {})
        self.client.ensure_session(sid, metadata=meta, peers={
            user: {"observe_me": True, "observe_others": False},
            self.ai: {"observe_me": False, "observe_others": True},
        })
        self._ready.add(sid)

    # ---------------------------------------------------------------------------- the writes

    def _retry_pause(self, attempt: int, exc: BaseException) -> float:
        delay = self.config.retry_delay
        if isinstance(exc, HonchoUnavailable) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, 30.0))
        return delay

    def _delivered(self, delivery: Delivery) -> None:
        path = self.outbox.spool.path
        for _job, exc in delivery.refusals:
            if isinstance(exc, HonchoRejected):
                log.error("honcho: the server refused a write and it will not be retried: %s; "
                          "the job is kept in %s", exc, self.rejected.path)
            else:  # a bug in building the request: keep the data, say so
                log.error("honcho: a write failed unexpectedly (%s: %s); the job is kept in %s",
                          type(exc).__name__, exc, self.rejected.path)
        if delivery.error is not None:
            level = logging.WARNING if self._down_since is None else logging.DEBUG
            self._down_since = self._down_since or time.time()
            log.log(level, "honcho: a write failed (%s); %d job(s) kept in %s and sent again once "
                    "Honcho answers", delivery.error, delivery.left, path)
        elif self._down_since is not None and delivery.sent:
            log.info("honcho: reachable again after %.0f s", time.time() - self._down_since)
            self._down_since = None

    def _perform(self, job: Job) -> None:
        kind = job.get("kind")
        sid = job.get("session")
        if isinstance(sid, str):
            with self._lock:
                for key, value in (job.get("meta") or {}).items():
                    self._meta.setdefault(sid, {}).setdefault(key, value)
            self.ensure_session(sid)
        if kind == "session":
            return
        if kind == "messages":
            assert isinstance(sid, str)
            self.client.add_messages(sid, job["messages"])
        elif kind == "conclude":
            peer = job.get("peer") or self.user
            self.ensure_peers(peer)
            self.client.create_conclusions([{"content": job["content"], "observer_id": self.ai,
                                             "observed_id": peer,
                                             **({"session_id": sid} if sid else {})}])
        elif kind == "forget":
            peer = job.get("peer") or self.user
            self.ensure_peers(peer)
            for conclusion_id in self._find_conclusions(job["content"], peer):
                self.client.delete_conclusion(conclusion_id)
        else:
            raise ValueError(f"unknown job kind {kind!r}")

    def ensure_peers(self, user: str | None = None) -> None:
        """Get-or-create the workspace, the agent's peer and the user peer ``user`` (default:
        ``user_peer``), each once per provider."""
        user = user or self.user
        if self.ai not in self._peers:
            self.client.ensure_workspace()
        if user not in self._peers:
            self.client.ensure_peer(user, {"role": "user"})
            self._peers.add(user)
        if self.ai not in self._peers:
            self.client.ensure_peer(self.ai, {"role": "agent"})
            self._peers.add(self.ai)

    def _find_conclusions(self, content: str, peer: str) -> list[str]:
        return [c.id for c in self.client.all_conclusions(observer=self.ai, observed=peer)
                if c.content.strip() == content.strip()]

    # ---------------------------------------------------------------------------- the refresh

    def _request_refresh(self, session: Session, sid: str, query: str, turn: int, base: bool,
                         dialectic: bool) -> None:
        with self._refresh_cond:
            pending = self._pending.get(sid)
            if pending is not None:  # coalesce: one refresh, newest query
                base, dialectic = base or pending["base"], dialectic or pending["dialectic"]
            self._pending[sid] = {"sid": sid, "query": query, "turn": turn, "base": base,
                                  "dialectic": dialectic}
            if sid in self._refreshing:
                return  # the session's job takes it when the refresh it runs is over
            self._refreshing.add(sid)
        # This turn's messages were sent by sync_turn, before queue_prefetch on the same lane:
        # the dialectic sees them.
        if not self.context.run_later(lambda: self._refresh_session(sid),
                                      f"honcho: refresh the recall of {sid}",
                                      kind="disposable", session=session):
            self._refreshed(sid)  # the host is closing

    def _refresh_session(self, sid: str) -> None:
        """A job on the disposable lane: the session's newest refresh, until none is asked for."""
        try:
            while True:
                with self._refresh_cond:
                    job = None if self._stopped else self._pending.pop(sid, None)
                    if job is None:  # done, under the lock that a new request takes first
                        self._refreshed(sid)
                        return
                self._refresh(job)
        except BaseException:
            self._refreshed(sid)  # the kernel logs it; recall just stays as it was
            raise

    def _refreshed(self, sid: str) -> None:
        with self._refresh_cond:  # re-entrant: a Condition's lock is an RLock
            self._refreshing.discard(sid)
            self._pending.pop(sid, None)
            self._refresh_cond.notify_all()

    def _refresh(self, job: dict[str, Any]) -> None:
        sid, query, turn = job["sid"], job["query"], job["turn"]
        state = self._state(sid)
        cfg = self.config
        user = self.peer_of_session(sid) or self.user
        try:
            self.ensure_session(sid)
            if job["base"]:
                ctx = self.client.session_context(sid, peer_target=user,
                                                  peer_perspective=self.ai, search_query=query,
                                                  tokens=max(1, cfg.context_chars // 4))
                state.base.record(turn, base_text(
                    summary=ctx.summary.content if ctx.summary else None,
                    representation=ctx.peer_representation, card=ctx.peer_card,
                    user=user, ai=self.ai))
            if job["dialectic"]:
                answer = self.client.chat(self.ai, query, target=user,
                                          reasoning_level=cfg.reasoning_level)
                state.dialectic.record(turn, (answer or "").strip()[: cfg.dialectic_max_chars])
            state.query = query
            if self._reads_down_since is not None:
                log.info("honcho: recall works again")
                self._reads_down_since = None
        except HonchoError as exc:
            # Fail open: the previous recall stays in place; the next turn tries again.
            level = logging.WARNING if self._reads_down_since is None else logging.DEBUG
            self._reads_down_since = self._reads_down_since or time.time()
            log.log(level, "honcho: could not refresh the recall for session %s: %s", sid, exc)
        finally:
            state.ready.set()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait (bounded) until queued writes and recall refreshes are done: for tests and benchmarks."""
        deadline = time.monotonic() + timeout
        if not self.outbox.wait_idle(timeout):
            return False
        with self._refresh_cond:
            return self._refresh_cond.wait_for(lambda: not self._refreshing,
                                               max(0.0, deadline - time.monotonic()))

    # -------------------------------------------------------------------------------- hooks

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        mode = self.config.recall_mode
        text = (f"Honcho keeps a model of the user (peer '{self.peer_for(session)}') built from your "
                f"conversations with them, across sessions; you are peer '{self.ai}'.")
        if mode != "tools":
            text += (" What it recalls for a message is added to that message as recalled memory "
                     "context.")
        if mode != "context":
            text += (" Use honcho_search (what was said), honcho_context and honcho_profile (what "
                     "is known), honcho_reasoning (a question about the user) and honcho_conclude "
                     "(record or remove a durable fact about the user).")
        return text

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        if self.config.recall_mode == "tools":
            return None
        sid = self._remember(session)
        state = self._state(sid)
        if not state.ready.is_set():
            if is_trivial(query):
                return None
            with self._refresh_cond:
                underway = sid in self._refreshing
            if not underway:
                self._request_refresh(session, sid, query, state.turn, True,
                                      state.dialectic.cadence > 0)
            state.ready.wait(self.first_turn_wait)
        return render(state, user=self.peer_of_session(sid) or self.user, ai=self.ai,
                      limit=self.config.context_chars) or None

    @hookimpl
    def queue_prefetch(self, query: str, session: Session) -> None:
        if self.config.recall_mode == "tools" or is_trivial(query):
            return
        sid = self._remember(session)
        state = self._state(sid)
        with self._lock:
            state.turn += 1
            turn = state.turn
            base, dialectic = state.base.due(turn), state.dialectic.due(turn)
        if base or dialectic:
            self._request_refresh(session, sid, query, turn, base, dialectic)

    @hookimpl
    def sync_turn(self, user_message: Message, assistant_message: Message, session: Session) -> None:
        sid = self._remember(session)
        limit = self.config.message_max_chars
        items: list[dict[str, Any]] = []
        user = self.peer_of_session(sid) or self.user
        for message, peer in ((user_message, user), (assistant_message, self.ai)):
            if not message.content.strip():
                continue
            pieces = split_message(message.content, limit)
            for i, piece in enumerate(pieces):
                meta: dict[str, Any] = {"hermes_session_id": session.id, "role": message.role}
                if len(pieces) > 1:
                    meta["part"] = f"{i + 1}/{len(pieces)}"
                items.append({"content": piece, "peer_id": peer, "metadata": meta,
                              "created_at": _iso(message.timestamp)})
        if items:
            with self._lock:
                meta = dict(self._meta.get(sid) or {})
            # kept, then sent here: the kernel runs sync_turn on this provider's own lane
            self.outbox.put(*({"kind": "messages", "session": sid, "meta": meta,
                               "messages": items[i:i + BATCH]}
                              for i in range(0, len(items), BATCH)))

    @hookimpl
    def on_session_switch(self, new_session: Session, old_session: Session | None,
                          reason: SwitchReason) -> None:
        sid = self._remember(new_session, str(reason))
        with self._lock:
            self._current = sid
            meta = dict(self._meta[sid])
        if old_session is not None and reason in (SwitchReason.COMPRESSION, SwitchReason.BRANCH):
            parent = self._states.get(self.session_id(old_session))
            if parent is not None:
                self._state(sid).inherit(parent)
        self.outbox.put({"kind": "session", "session": sid, "meta": meta}, now=False)

    @hookimpl
    def on_memory_write(self, write: MemoryWrite) -> None:
        if not self.config.mirror_memory_writes or write.target != "user":
            return
        sid = self.session_id(write.session_id) if write.session_id else None
        if sid is None and not self.per_user:  # per user, the last session may be another's
            sid = self._current
        peer = self.peer_of_session(sid) if sid else None
        if peer is None:
            if self.per_user:
                # a note of a session this provider never saw: whose it is cannot be told, and
                # filing it under the shared peer could show it to every user
                log.info("honcho: a user note of session %s is not mirrored (its user is unknown "
                         "here)", write.session_id or "-")
                return
            peer = self.user
        if write.action in ("add", "replace") and write.content.strip():
            self.outbox.put({"kind": "conclude", "content": write.content.strip(),
                             "peer": peer, **({"session": sid} if sid else {})}, now=False)
        if write.action in ("replace", "remove") and write.old_text:
            self.outbox.put({"kind": "forget", "content": write.old_text, "peer": peer},
                            now=False)

    @hookimpl
    def on_pre_compress(self, messages: list[Message], session: Session) -> str | None:
        state = self._states.get(self.session_id(session))
        if state is None or not state.base.text:
            return None
        return (f"Honcho's model of {self.peer_for(session)} (durable across sessions; keep what "
                f"matters for "
                f"the task):\n{state.base.text}")

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return list(self._tools)

    def _stored_user_peers(self) -> list[str]:
        """The workspace's per-user peers (listed on the server, so users this process never
        served are found too): ids of the form ``user_peer_id`` makes."""
        shape = re.compile(re.escape(self.config.user_peer_prefix) + r".+-[0-9a-f]{16}")
        return [p for p in self.client.peer_ids() if shape.fullmatch(p) and p != self.ai]

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete the conclusions and card lines about the user that mention ``subject``;
        messages cannot be deleted through Honcho's API (said in ``cannot_delete``). What still
        waits in the outbox mentioning it is dropped first, so none of it is sent afterwards."""
        from .forget import MESSAGES_NOTE, HonchoForget, find_and_delete, scrub_outbox

        everyone = True  # the outbox's jobs of every peer
        if scope.startswith("user:") and self.per_user:
            peers, everyone = [self.peer_of_user(scope[len("user:"):])], False
        elif scope == "all" or scope == f"user:{self.user}":
            with self._lock:  # every user peer this provider wrote for, and the shared one
                peers = sorted({self.user, *(p for p in self._peers if p != self.ai)})
            if self.per_user and scope == "all":  # and those of users seen by other processes
                peers = sorted({*peers, *self._stored_user_peers()})
        else:
            return ForgetReport(self.name, dry_run=dry_run, cannot_delete=(
                f"this provider keeps one user peer ({self.user!r}); forget with scope 'all'"))
        # What still waits in the outbox is scrubbed before anything more is sent, then queued
        # writes go first, so nothing mentioning it lands after the deletion below
        pending, note = scrub_outbox(self.outbox.spool, subject,
                                     lambda job: everyone or self._job_peer(job) in peers,
                                     dry_run=dry_run, rejected=self.rejected)
        self.wait_idle(10.0)
        found = HonchoForget()
        for peer in peers:
            self.ensure_peers(peer)
            one = find_and_delete(self.client, observer=self.ai, observed=peer,
                                  subject=subject, dry_run=dry_run)
            found.conclusions += one.conclusions
            found.card_lines += one.card_lines
            found.deleted += one.deleted
        if not dry_run:
            with self._lock:  # cached recall may quote it: the next prefetch asks afresh
                self._states.clear()
        items = [f"conclusion {cid}: {text[:80]}" for cid, text in found.conclusions]
        items += [f"peer card line: {line[:80]}" for line in found.card_lines]
        items += pending
        return ForgetReport(self.name, matched=len(items),
                            deleted=found.deleted + (0 if dry_run else len(pending)),
                            dry_run=dry_run, items=items, cannot_delete=MESSAGES_NOTE,
                            notes=[note] if note else [])

    def _job_peer(self, job: Job) -> str:
        """The user peer an outbox job is about."""
        peer = job.get("peer") if job.get("kind") in ("conclude", "forget") else (
            (job.get("meta") or {}).get("user_peer"))
        return peer if isinstance(peer, str) and peer else self.user

    @hookimpl
    def shutdown(self) -> None:
        with self._refresh_cond:
            if self._stopped:
                return
            self._stopped = True
            self._refreshing.clear()  # the jobs the kernel's shutdown dropped never report back
            self._refresh_cond.notify_all()
        self.outbox.close()  # unsent jobs wait in the outbox for the next start
        self.client.close()  # a refresh stuck in a request is the kernel's to abandon


def _refused(exc: BaseException) -> bool:
    """A write sending again cannot help: the server refused it, or building it failed."""
    return isinstance(exc, HonchoRejected) or not isinstance(exc, HonchoError)
