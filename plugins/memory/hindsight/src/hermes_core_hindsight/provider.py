"""The ``hindsight`` memory provider: the hooks, wired to the client, the writer and the prefetcher.

Data path of a turn (see docs in README.md):

* ``sync_turn`` builds one retain *job* for the turn (``User: ...`` / ``Assistant: ...`` text,
  session, lineage and platform tags, string metadata), keeps it in the spool file
  (``hindsight/spool-<bank>.jsonl``, a :class:`hermes_core.storage.spool.Courier`) and sends the
  spool in order, there: the kernel runs ``sync_turn`` on this provider's own lane, never on the
  turn's thread;
* a job goes to ``POST /banks/{bank}/memories`` under the document id of the session with
  ``update_mode="append"`` when the server's ``/version`` is 0.5.0 or later (older servers get one
  document per turn); a retryable failure is tried ``retain_attempts`` times with a growing pause,
  then the job waits in the spool: while the server is failing, turns are only kept and one
  background attempt at a time (``run_later``) sends the spool; the next start sends what is left.
  A job the server refuses (4xx) goes to ``rejected-<bank>.jsonl`` with the reason;
* ``queue_prefetch`` starts a recall on the provider's disposable lane (``run_later``); ``prefetch``
  serves it (see :mod:`.recall`); the provider starts no thread of its own;
* ``on_session_end`` waits (bounded) for a background send; ``shutdown`` leaves what is unsent in
  the spool.

With ``memory.scope: user`` every user key has a bank of its own (:func:`.config.user_bank`):
turns, recall, the tools and mirrored notes of a session go to the bank of the session's user
(``session.user_id``), so one user's facts are never recalled for another. A session without a
user key uses the configured bank, as in the global scope.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Any

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.storage.spool import Courier, Delivery, Spool
from hermes_core.types import (
    EndReason,
    ForgetReport,
    MemoryWrite,
    Message,
    Session,
    SwitchReason,
)

from .client import (
    HindsightClient,
    HindsightRejected,
    HindsightUnavailable,
    Memory,
    ServerInfo,
)
from .config import FACT_TYPES, FactType, HindsightConfig, user_bank
from .recall import Prefetcher, render
from .tools import build_tools

__all__ = ["HindsightMemory"]

#: seconds before a failed ``/version`` probe is tried again
PROBE_RETRY = 5.0
#: how long ``/version`` may take: it is tiny and asked at most once per PROBE_RETRY
PROBE_TIMEOUT = 2.0
#: at most this share of ``memory.prefetch_timeout`` is spent waiting for a live recall
LIVE_WAIT_SHARE = 0.6
#: seconds before the second attempt of a retain; doubled for each later one
BACKOFF = 0.5


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def _shorten(text: str, limit: int) -> str:
    """``text`` with its middle replaced by a note when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters left out ...]\n{text[-tail:]}"


def _refused(exc: BaseException) -> bool:
    """A retain error that retrying cannot fix (the request itself is wrong)."""
    return isinstance(exc, HindsightRejected) and exc.status not in (401, 403, 404, 408, 409)


class HindsightMemory(MemoryProvider):
    """Long-term semantic memory in a Hindsight server."""

    name = "hindsight"
    Config = HindsightConfig
    description = "long-term semantic memory in a Hindsight server (retain, recall, reflect)"

    config: HindsightConfig

    def __init__(self, config: HindsightConfig, context: PluginContext,
                 *, client: HindsightClient | None = None) -> None:
        super().__init__(config, context)
        self.log = context.logger
        self.client = client or HindsightClient(
            config.base_url, api_key=config.bearer(), connect_timeout=config.connect_timeout,
            timeout=config.recall_timeout)
        self._lock = threading.Lock()
        self._info: ServerInfo | None = None
        self._probe_after = 0.0
        self._warned_types = False
        self._lineage: dict[str, str] = {}
        #: (bank, operation id) of async retains sent and not yet seen finished (see settle)
        self._operations: deque[tuple[str, str]] = deque(maxlen=1_000)
        #: the last operations settle() saw failing: (id, the server's error message)
        self.failed_operations: list[tuple[str, str | None]] = []
        #: ``memory.scope: user``: one bank per user key
        self.per_user = getattr(getattr(context.config, "memory", None), "scope", "global") == "user"
        #: hermes-core session id -> its user key or None (to route a note written in a session)
        self._session_users: dict[str, str | None] = {}
        #: every bank this provider has written to (settle waits on each)
        self._banks: set[str] = {config.bank}
        deadline = context.config.memory.prefetch_timeout
        self.live_wait = min(config.prefetch_live_wait, LIVE_WAIT_SHARE * deadline)
        folder = context.home / "hindsight"
        self.rejected = Spool(folder / f"rejected-{config.bank}.jsonl")
        self.retains = Courier(
            Spool(folder / f"spool-{config.bank}.jsonl"), self._send, run_later=context.run_later,
            refused=_refused, rejected=self.rejected, attempts=config.retain_attempts,
            pause=lambda attempt, exc: BACKOFF * 2 ** attempt, report=self._delivered,
            label="hindsight: send the spool")
        if self.retains.spool.has_pending():  # a previous run left turns: they go first
            self.retains.later()
        self.prefetcher = Prefetcher(self._recall_for_prefetch, logger=self.log,
                                     run_later=context.run_later)
        self._tools = build_tools(self)
        self._closed = False

    # ------------------------------------------------------------------------------- banks

    def bank_of_user(self, user: str | None) -> str:
        """The bank of a user key: its own with ``memory.scope: user``, else the configured one."""
        if not self.per_user or not user:
            return self.config.bank
        return user_bank(self.config.bank, user)

    def bank_for(self, session: Session | None) -> str:
        """The bank of ``session``'s user (see :meth:`bank_of_user`); remembers the session's user."""
        if not self.per_user or session is None:
            return self.config.bank
        bank = self.bank_of_user(session.user_id)
        with self._lock:
            if len(self._session_users) > 10_000:  # bounded: oldest first
                self._session_users.pop(next(iter(self._session_users)))
            self._session_users[session.id] = session.user_id
            self._banks.add(bank)
        return bank

    # ----------------------------------------------------------------------------- the server

    def server_info(self) -> ServerInfo | None:
        """``/version`` of the server, asked once (again after a failure, at most every 5 s)."""
        with self._lock:
            if self._info is not None or time.monotonic() < self._probe_after:
                return self._info
        try:
            info = self.client.version(timeout=PROBE_TIMEOUT)
        except HindsightUnavailable as exc:
            with self._lock:
                self._probe_after = time.monotonic() + PROBE_RETRY
            self.log.info("hindsight: %s", exc)
            return None
        with self._lock:
            self._info = info
        return info

    def recall_types(self) -> list[str]:
        """The fact types to recall, following what the server has.

        Without an LLM the server consolidates no observations, so asking only for them would
        always come back empty: observations are requested only when ``/version`` says they exist,
        and a configured list that contains nothing else falls back to world and experience facts.
        """
        info = self.server_info()
        observations = bool(info and info.observations)
        wanted: list[FactType] = list(self.config.recall_types or FACT_TYPES)
        usable = [t for t in wanted if t != "observation" or observations]
        if self.config.recall_types and usable != wanted and not self._warned_types:
            self._warned_types = True
            self.log.warning("hindsight: the server has no observations (no LLM); recalling %s "
                             "instead of %s", usable or ["world", "experience"], wanted)
        return list(usable or ["world", "experience"])

    def _send(self, job: dict[str, Any]) -> None:
        """Send one retain job (the writer's ``send``)."""
        info = self.server_info()
        if info is None:
            raise HindsightUnavailable(f"Hindsight at {self.config.base_url} is not answering")
        items = []
        for item in job["items"]:
            item = dict(item)
            session_id = job.get("session_id")
            if session_id:
                if info.supports_append:
                    item["document_id"] = session_id
                    item["update_mode"] = "append"
                else:
                    item["document_id"] = f"{session_id}#turn-{job.get('turn', 0)}"
            items.append(item)
        bank = job.get("bank", self.config.bank)
        with self._lock:
            self._banks.add(bank)
        data = self.client.retain(bank, items, async_=self.config.retain_async,
                                  operation_id=job.get("operation_id"),
                                  timeout=self.config.retain_timeout)
        ids = [data.get("operation_id"), *(data.get("operation_ids") or [])]
        with self._lock:
            for op in dict.fromkeys(i for i in ids if isinstance(i, str) and i):
                self._operations.append((bank, op))

    def _delivered(self, delivery: Delivery) -> None:
        for job, exc in delivery.refusals:
            self.log.error("hindsight: the server refused %s: %s (kept in %s)",
                           job.get("label", "a turn"), exc, self.rejected.path)
        if delivery.error is not None:
            self.log.warning("hindsight: %d turn(s) kept in %s to be sent later: %s",
                             delivery.left, self.retains.spool.path, delivery.error)

    def _recall_for_prefetch(self, query: str, session: Session) -> list[Memory]:
        limit = self.config.prefetch_max_results * 3  # room for skipped current-session memories
        memories = self.client.recall(
            self.bank_for(session), query[:2000], types=self.recall_types(),
            budget=self.config.recall_budget, max_tokens=self.config.recall_max_tokens,
            timeout=self.config.recall_timeout)
        return memories[:limit]

    # ------------------------------------------------------------------------------- sessions

    def lineage_root(self, session: Session) -> str:
        """The first session of a chain of compactions (the session itself when it has no parent)."""
        parent = session.parent_session_id
        if not parent:
            return session.id
        with self._lock:
            return self._lineage.get(parent, parent)

    def session_tags(self, session: Session | None) -> list[str]:
        """Tags of everything retained for ``session``: session, lineage, parent, platform."""
        tags = list(self.config.tags)
        if session is None:
            return tags
        tags += [f"session:{session.id}", f"lineage:{self.lineage_root(session)}",
                 f"platform:{session.platform}"]
        if session.parent_session_id:
            tags.append(f"parent:{session.parent_session_id}")
        return tags

    def turn_job(self, user: Message, assistant: Message, session: Session,
                 messages: list[Message]) -> dict[str, Any] | None:
        """The retain job of one completed turn, or ``None`` when it has no text."""
        tools = sorted({c.name for m in messages[-40:] if m.role == "assistant"
                        and m.timestamp >= user.timestamp for c in m.tool_calls})
        parts = []
        if user.content.strip():
            parts.append(f"User: {user.content.strip()}")
        if assistant.content.strip():
            parts.append(f"Assistant: {assistant.content.strip()}")
        if not parts:
            return None
        if tools:
            parts.append(f"(tools used: {', '.join(tools)})")
        text = _shorten("\n".join(parts), self.config.retain_max_chars)
        turn = sum(1 for m in messages if m.role == "user") or 1
        metadata = {"session_id": session.id, "turn": str(turn), "platform": session.platform,
                    "source": "hermes-core"}
        if session.parent_session_id:
            metadata["parent_session_id"] = session.parent_session_id
        size = self.config.retain_item_chars
        items = [{
            "content": text[start:start + size],
            "timestamp": _iso(user.timestamp),
            "context": "conversation turn" if start == 0 else "conversation turn (continued)",
            "metadata": metadata,
            "tags": self.session_tags(session),
        } for start in range(0, len(text), size)]
        return {"bank": self.bank_for(session), "session_id": session.id, "turn": turn,
                "items": items, "label": f"turn {turn} of session {session.id}",
                "operation_id": str(uuid.uuid4())}

    # ---------------------------------------------------------------------------------- hooks

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        # Built from the config only, so it is the same bytes all session long.
        lines = [f"Long-term memory (Hindsight, bank {self.bank_for(session)!r}) is active."]
        if self.config.auto_retain:
            lines.append("Every turn of this conversation is retained in it automatically.")
        if self.config.auto_recall:
            lines.append("Memories relevant to the user's message may appear in the "
                         "memory-context block; they come from earlier conversations.")
        lines.append("Use hindsight_recall to search it, hindsight_retain to store a fact "
                     "explicitly, hindsight_reflect for a reasoned answer over everything stored.")
        return " ".join(lines)

    @hookimpl
    def on_session_switch(self, new_session: Session, old_session: Session | None,
                          reason: SwitchReason) -> None:
        self.bank_for(new_session)  # learn the session's user (for notes written in it)
        if new_session.parent_session_id:
            root = self.lineage_root(new_session)
            with self._lock:
                self._lineage[new_session.id] = root
        if old_session is not None:  # its turns were sent by sync_turn, on this lane
            self.prefetcher.drop(old_session.id)

    @hookimpl
    def sync_turn(self, user_message: Message, assistant_message: Message, session: Session,
                  messages: list[Message]) -> None:
        if not self.config.auto_retain or self._closed:
            return
        job = self.turn_job(user_message, assistant_message, session, messages)
        if job is not None:
            self.retains.put(job)  # kept, then sent here, on the provider's own lane

    @hookimpl
    def queue_prefetch(self, query: str, session: Session) -> None:
        if self.config.auto_recall and not self._closed:
            self.prefetcher.queue(query, session)

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        if not self.config.auto_recall or self._closed:
            return None
        memories = self.prefetcher.get(query, session, wait=self.live_wait)
        skip = session.id if self.config.recall_skip_current_session else None
        return render(memories, bank=self.bank_for(session), max_results=self.config.prefetch_max_results,
                      max_chars=self.config.prefetch_max_chars, skip_session=skip)

    @hookimpl
    def on_session_end(self, session: Session, messages: list[Message], reason: EndReason) -> None:
        self.retains.wait_idle(self.config.switch_flush_timeout)
        self.prefetcher.drop(session.id)

    @hookimpl
    def on_memory_write(self, write: MemoryWrite) -> None:
        # A note saved in another store (MEMORY.md / USER.md) is a durable fact: keep it here too,
        # so it can be recalled by meaning. Removals cannot be mirrored: Hindsight has no handle
        # on the fact a note became.
        if write.action == "remove" or not write.content.strip() or self._closed:
            return
        bank = self.config.bank
        if self.per_user:
            with self._lock:
                known = (write.session_id or "") in self._session_users
                user = self._session_users.get(write.session_id or "")
            if not known:
                # a note from a session this provider never saw: its user is unknown, and keeping
                # it in the shared bank could show one user's note to everyone
                self.log.info("hindsight: a %s note of session %s is not mirrored (its user is "
                              "unknown here)", write.target, write.session_id or "-")
                return
            bank = self.bank_of_user(user)
        tags = [*self.config.tags, f"source:{write.provider or 'memory'}",
                f"target:{write.target}"]
        if write.session_id:
            tags.append(f"session:{write.session_id}")
        item = {"content": write.content.strip(), "context": f"saved to {write.target} notes",
                "metadata": {"source": "memory-write", "target": write.target,
                             "origin": write.origin}, "tags": tags}
        self.retains.put({"bank": bank, "items": [item],
                          "label": f"{write.action} of a {write.target} note",
                          "operation_id": str(uuid.uuid4())}, now=False)

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return list(self._tools)

    def _stored_user_banks(self) -> list[str]:
        """The server's per-user banks of the configured bank (listed on the server, so users
        this process never served are found too): ids of the form ``user_bank`` makes."""
        stem = self.config.bank[:64] + ".user."
        shape = re.compile(re.escape(stem) + r".+\.[0-9a-f]{16}")
        return [b for b in self.client.bank_ids(search=stem, timeout=self.config.recall_timeout)
                if shape.fullmatch(b)]

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """List the bank's memories that mention ``subject``; delete none (see ``cannot_delete``).
        First drop the turns and notes still waiting in the spool that mention it (they are never
        sent; the whole turn goes, as it is one text), so none lands on the server afterwards.

        Hindsight's API deletes a whole *document* (here: a whole retained session, with every
        memory drawn from it) or a whole bank, not one memory; deleting documents to forget one
        fact would silently lose everything else those sessions taught. So this provider reports
        what matches and which documents hold it, and leaves the choice to the user.

        With ``memory.scope: user``, ``scope`` ``user:<key>`` looks in that user's bank and ``all``
        in the configured bank and every user bank this provider has used; with the global scope
        every scope looks in the one bank.
        """
        needle = " ".join(subject.split()).casefold()
        own = self.bank_of_user(scope[len("user:"):]) if (
            scope.startswith("user:") and self.per_user) else None
        # what waits in the spool first (its turns and notes mentioning it are never sent), then
        # what is being sent: nothing mentioning it reaches the server after the search below
        pending, note = self._scrub_spool(needle, own, dry_run)
        self.retains.wait_idle(10.0)
        if own is not None:
            banks = [own]
        else:  # global scope: the one bank, whatever the scope (as it always was)
            with self._lock:
                banks = sorted(self._banks)
            if self.per_user and scope == "all":  # and the banks of users other processes served
                banks = sorted({*banks, *self._stored_user_banks()})
        found = [m for bank in banks for m in self.client.recall(
            bank, subject, types=self.recall_types(), budget="high", max_tokens=8192,
            timeout=self.config.recall_timeout)]
        hits = [m for m in found if needle in " ".join(m.text.split()).casefold()]
        documents = sorted({m.document_id for m in hits if m.document_id})
        items = [f"memory {m.id} (document {m.document_id or '-'}): {m.text[:80]}" for m in hits]
        reason = None
        if hits:
            reason = (
                "Hindsight's API deletes whole documents (a retained session and every memory "
                f"drawn from it), not single memories. The {len(hits)} matching memories are in "
                f"document(s) {', '.join(documents) or '(none named)'} of bank(s) "
                f"{', '.join(repr(b) for b in banks)}; to remove them, delete those documents on the server "
                "(DELETE /v1/default/banks/<bank>/documents/<id>), accepting that the rest of "
                "those sessions is forgotten too.")
        return ForgetReport(self.name, matched=len(hits) + len(pending),
                            deleted=0 if dry_run else len(pending), dry_run=dry_run,
                            items=items + pending, cannot_delete=reason,
                            notes=[note] if note else [])

    def _scrub_spool(self, needle: str, bank: str | None,
                     dry_run: bool) -> tuple[list[str], str | None]:
        """Drop (unless ``dry_run``) the spooled jobs (of ``bank``, or of every bank) whose text
        mentions ``needle``: a turn is retained as one text, so the whole turn goes. One line per
        job, and a note when one was being sent and could not be held back."""

        def text(job: dict[str, Any]) -> str:
            items = job.get("items")
            if not isinstance(items, list):
                return ""
            return "".join(i["content"] for i in items
                           if isinstance(i, dict) and isinstance(i.get("content"), str))

        def edit(job: dict[str, Any]) -> dict[str, Any] | None:
            mine = bank is None or job.get("bank", self.config.bank) == bank
            return None if mine and needle in " ".join(text(job).split()).casefold() else job

        def mentions(line: str) -> bool:
            return needle in " ".join(line.split()).casefold()

        # the retains the server refused and the spool's unreadable lines too (any mentioning it)
        done = self.retains.spool.scrub(edit, rejected=self.rejected, dry_run=dry_run,
                                        mentions=mentions)
        note = None if done.settled else (
            "a retain that mentions it was being sent when forget ran and could not be held "
            "back; run forget again once the server has answered")
        items = [f"pending {job.get('label', 'retain')} (not sent yet): {text(job)[:80]}"
                 for job in done.removed]
        items += [f"refused {job.get('label', 'retain')} (kept aside): {text(job)[:80]}"
                  for job in done.rejected]
        items += [f"unreadable spool line: {' '.join(line.split())[:80]}"
                  for line in done.unreadable]
        return items, note

    @hookimpl
    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.retains.close()  # what is unsent waits in the spool for the next start
        self.prefetcher.close()
        self.client.close()

    # ------------------------------------------------------------------------------ for tests

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until everything retained so far is stored and searchable on the server.

        In order, each step bounded by what is left of ``timeout``: the background send is over;
        turns left in the spool (the server was slow or down) have been sent too; every
        async retain it sent has reached a final state in the server's own operation status
        (``GET /operations/{id}``: completed, failed, cancelled); and the bank has no pending or
        processing operation left (consolidations the retains started). Recalls in flight have
        finished. ``False`` if that took longer than ``timeout`` or the server stopped answering;
        operations that failed are listed in :attr:`failed_operations`.
        """
        end = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, end - time.monotonic())

        if not self.retains.wait_idle(timeout):
            return False
        while self.retains.spool.has_pending() and left() > 0:
            if self.retains.deliver().error is not None and not self._wait(0.2, end):
                return False
        if self.retains.spool.has_pending():
            return False
        try:
            if not self._operations_done(end):
                return False
            with self._lock:
                banks = sorted(self._banks)
            for bank in banks:
                while self.client.pending_operations(bank, timeout=min(5.0, left())):
                    if not self._wait(0.1, end):
                        return False
        except HindsightUnavailable:
            return False
        return self.prefetcher.idle(left())

    def _wait(self, seconds: float, end: float) -> bool:
        """Pause between two looks at the server's state; ``False`` once ``end`` has passed."""
        if time.monotonic() + seconds >= end:
            return False
        time.sleep(seconds)
        return True

    def _operations_done(self, end: float) -> bool:
        with self._lock:
            waiting = list(self._operations)
        for bank, op in waiting:
            while True:
                status, error = self.client.operation_status(
                    bank, op, timeout=min(5.0, max(0.1, end - time.monotonic())))
                if status in ("completed", "failed", "cancelled", "not_found"):
                    break
                if not self._wait(0.1, end):
                    return False
            if status == "failed":
                self.failed_operations.append((op, error))
                self.log.warning("hindsight: the server failed retain operation %s: %s", op, error)
            with self._lock, contextlib.suppress(ValueError):
                self._operations.remove((bank, op))
        return True
