"""The built-in file memory: MEMORY.md and USER.md, a frozen prompt snapshot, the ``memory`` tool.

Two bounded stores live in ``$HERMES_CORE_HOME/memories/``: MEMORY.md (the agent's notes) and
USER.md (the user's profile). When a session starts the provider reads both, drops duplicate
entries and freezes a rendered snapshot; :meth:`FileMemory.system_prompt_block` returns that
snapshot unchanged for the rest of the session, whatever is written meanwhile, so the system prompt
stays byte-identical. Writes through the ``memory`` tool reach disk at once (see :mod:`.store`) and
are mirrored to the other active providers.

User documentation: ``docs/file-memory.md``.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl
from hermes_core.kinds import DeferredConfig, MemoryProvider, PluginContext, Tool
from hermes_core.types import ForgetReport, Message, Session, SwitchReason, ToolContext

from . import pins as _pins
from .backend import open_store
from .entries import dedupe
from .errors import MemoryRefused
from .snapshot import Snapshot, load_snapshot
from .store import TARGETS, MemoryStore

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_core.config import LoadedConfig
    from hermes_core.doctor import DoctorCheck
    from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

    from .config import FileMemoryConfig
    from .recall import Hit
    from .tool import MemoryToolHandler

__all__ = [
    "FileMemory",
    "FileMemoryConfig",
    "MemoryRefused",
    "MemoryStore",
    "copy_storage",
    "doctor_checks",
    "register_memory_providers",
]


def __getattr__(name: str) -> Any:
    # the config model is imported on first use, with pydantic: importing the file memory
    # (``memory`` commands, a library user) does not pay for it until a config is validated
    if name != "FileMemoryConfig":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    model = globals()[name] = importlib.import_module(f"{__name__}.config").FileMemoryConfig
    return model

#: frozen snapshots kept (one per live session; the oldest is dropped past this)
_SNAPSHOTS = 512

#: switches after which the prompt is assembled afresh and the snapshot is re-read from disk
_REFREEZE = frozenset({SwitchReason.NEW, SwitchReason.RESUME, SwitchReason.COMPRESSION,
                       SwitchReason.RESET})


class FileMemory(MemoryProvider):
    """MEMORY.md / USER.md with a per-session frozen snapshot and the ``memory`` tool."""

    name = "file_memory"
    Config = DeferredConfig(f"{__name__}.config", "FileMemoryConfig")
    description = "MEMORY.md / USER.md notes with a frozen prompt snapshot and the memory tool"

    config: FileMemoryConfig

    def __init__(self, config: FileMemoryConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        core = context.config
        self._storage_url: str | None = getattr(getattr(core, "storage", None), "url", None)
        #: ``memory.scope: user``: each user key has its own store (and tool handler)
        self.per_user = getattr(getattr(core, "memory", None), "scope", "global") == "user"
        self.store = open_store(config, context.home, self._storage_url)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._stores_lock = threading.Lock()
        #: user key -> the tool handler of that user's store (opened once, then kept)
        self._handlers: dict[str, MemoryToolHandler] = {}
        #: ranking of entries by words and meaning (prefetch, the tool's search)
        from .recall import EntryRecall  # the embedder's machinery: with the provider

        self.recall = EntryRecall(context.embedder, enabled=config.semantic, core=context.config)
        self.handler = self._new_handler(self.store)
        from .tool import build_tool

        # the calling session's handler (its user's, with memory.scope: user), and the check of
        # forgets noted since the session's snapshot (see _forget_late)
        self._tool = dataclasses.replace(build_tool(self.handler), handler=self._dispatch_tool)
        from hermes_core.storage import resolve_storage_url
        from hermes_core.storage.erasure_log import ErasureLog

        #: forgets noted while a session's turns are in flight
        self._erasures = ErasureLog(context.home, resolve_storage_url(self._storage_url))
        #: session id -> the erasure log's settled mark when its snapshot was taken
        self._marks: OrderedDict[str, int] = OrderedDict()

    def _new_handler(self, store: MemoryStore) -> MemoryToolHandler:
        from .tool import MemoryToolHandler

        return MemoryToolHandler(
            store,
            enabled=self.target_enabled,
            max_failures=self.config.max_consolidation_failures,
            notify=self.context.notify_memory_write,
            provider=self.name,
            recall=self.recall,
        )

    def store_for(self, session: Session | None) -> MemoryStore:
        """The store of the session's user with ``memory.scope: user``; else the shared one.

        In user scope a session without a user key gets the shared store."""
        return self.handler_for(session).store

    def user_store(self, user: str) -> MemoryStore:
        """The store of user key ``user`` (opened once, then kept)."""
        return self._user_handler(user).store

    def handler_for(self, session: Session | None) -> MemoryToolHandler:
        user = session.user_id if (self.per_user and session is not None) else None
        return self.handler if user is None else self._user_handler(user)

    def _user_handler(self, user: str) -> MemoryToolHandler:
        with self._stores_lock:
            handler = self._handlers.get(user)
            if handler is None:
                handler = self._handlers[user] = self._new_handler(open_store(
                    self.config, self.context.home, self._storage_url, user=user))
            return handler

    def _dispatch_tool(self, args: Any, context: ToolContext) -> dict[str, Any]:
        out = self.handler_for(context.session)(args, context)
        if getattr(args, "action", "search") != "search":
            try:
                self._forget_late(context.session, args)
            except Exception as exc:  # the write stands: say so, never fail the tool call
                self.context.logger.error("file_memory: re-applying forgets to a write "
                                          "failed: %s", exc)
        return out

    def _forget_late(self, session: Session | None, args: Any) -> None:
        """A forget noted after ``session``'s snapshot was taken may not have reached what its
        turns still hold: a write of this session that mentions its subject is forgotten again
        (as the session archive does with what such a turn writes)."""
        if session is None:
            return
        mark = self._marks.get(session.id)
        if mark is None:  # a review's or flush's session: the conversation it works for
            owner = session.attributes.get("origin_session_id") or session.parent_session_id
            mark = self._marks.get(str(owner)) if owner else None
        if mark is None:
            return
        notes = [n for n in self._erasures.since(mark) if n.what == "forget"]
        if not notes:
            return
        from hermes_core.storage.erasure_log import strings

        from .versions import forget_entries

        texts = strings(args.model_dump() if hasattr(args, "model_dump") else args)

        for note in notes:
            if note.scope.startswith("user:") and (not self.per_user
                                                   or note.scope[5:] != (session.user_id or "")):
                continue
            subject = note.find_in(*texts)
            if subject is not None:
                done = forget_entries(self.store_for(session), subject)
                self._forget_vectors()
                self.context.logger.info("file_memory: a write of session %s mentioned a subject "
                                         "forgotten meanwhile; forgotten again (%d entr(ies))",
                                         session.id, done.deleted)

    # ------------------------------------------------------------------------------ helpers

    def target_enabled(self, target: str) -> bool:
        if target == "memory":
            return self.config.memory_enabled
        return target == "user" and self.config.user_profile_enabled

    def enabled_targets(self) -> tuple[str, ...]:
        return tuple(t for t in TARGETS if self.target_enabled(t))

    def live_entries(self, target: str, session: Session | None = None) -> list[str]:
        """The entries on disk now (writes of this session included), duplicates dropped."""
        return self.store_for(session).entries(target)

    def all_entries(self, session: Session | None = None) -> list[tuple[str, str]]:
        """(target, entry) of every enabled store, as on disk now."""
        states = self.store_for(session).read_many(self.enabled_targets())
        return [(t, e) for t, state in states.items() for e in dedupe(state.entries)]

    def recall_entries(self, query: str, session: Session | None = None, *,
                       budget: float | None = None) -> tuple[list[Hit], str | None]:
        """The entries ``prefetch`` would recall for ``query`` (best first, above
        ``recall_min_score``, at most ``recall_limit``), and why meaning took no part (None: it
        did). Without meaning nothing is recalled: word overlap alone is no reason to repeat
        an entry the system prompt already shows."""
        hits, problem = self.recall.rank(query, self.all_entries(session), budget=budget)
        if problem is not None:
            return [], problem
        hits = [h for h in hits if h.score >= self.config.recall_min_score]
        return hits[: self.config.recall_limit], None

    @property
    def snapshot(self) -> Snapshot | None:
        """The frozen snapshot of the current session, if one was taken."""
        return self._snapshot

    def freeze(self, session_id: str | None, session: Session | None = None) -> Snapshot:
        """Read both files now and make the result the session's snapshot."""
        if session_id is not None:  # the session's view of the stores is (re)loaded now
            self._mark(session_id)
        snap = load_snapshot(self.store_for(session), targets=self.enabled_targets(),
                             session_id=session_id)
        for warning in snap.warnings:
            self.context.logger.warning("file_memory: %s", warning)
        for target, pattern in snap.blocked:
            self.context.logger.warning(
                "file_memory: a %s entry matched threat pattern %s and was left out of the "
                "system prompt; remove it with 'hermes-core memory remove --target %s ...'",
                target, pattern, target,
            )
        self._remember(snap)
        return snap

    def _mark(self, session_id: str, mark: int | None = None) -> None:
        """Note the erasure log's settled mark for ``session_id`` (now, or ``mark``): a forget
        noted after it may not have reached what the session's turns hold."""
        if mark is None:
            try:
                mark = self._erasures.settled()
            except Exception as exc:
                self.context.logger.error("file_memory: cannot read the erasure log (%s): a "
                                          "forget landing during this session's turns may be "
                                          "written again", exc)
                return
        self._marks[session_id] = mark
        self._marks.move_to_end(session_id)
        while len(self._marks) > _SNAPSHOTS:
            self._marks.popitem(last=False)

    def _remember(self, snap: Snapshot) -> None:
        self._snapshot = snap
        if snap.session_id is not None:
            self._snapshots[snap.session_id] = snap
            self._snapshots.move_to_end(snap.session_id)
            while len(self._snapshots) > _SNAPSHOTS:
                self._snapshots.popitem(last=False)

    def _ensure_frozen(self, session: Session) -> Snapshot:
        # Called with self._lock held. One freeze per session id, whichever of
        # system_prompt_block and on_session_switch arrives first (the switch runs on the
        # background worker, so the order is not fixed). Several conversations (serve) each
        # keep their own snapshot.
        snap = self._snapshots.get(session.id)
        if snap is None:
            snap = self.freeze(session.id, session)
        return snap

    # -------------------------------------------------------------------------------- hooks

    @hookimpl
    def on_session_switch(
        self, new_session: Session, old_session: Session | None, reason: SwitchReason
    ) -> None:
        with self._lock:
            if reason == SwitchReason.BRANCH and old_session is not None:
                # A branch continues the same conversation under a new id: keep its prompt.
                old = self._snapshots.get(old_session.id)
                if old is not None:
                    self._remember(dataclasses.replace(old, session_id=new_session.id))
                if old_session.id in self._marks:  # and its history, so its mark
                    self._mark(new_session.id, self._marks[old_session.id])
                return
            if old_session is None or reason in _REFREEZE:
                self._ensure_frozen(new_session)
            if (reason == SwitchReason.COMPRESSION and old_session is not None
                    and old_session.id in self._marks):  # the child continues its history
                self._mark(new_session.id, self._marks[old_session.id])
        self._warm(new_session)

    def _warm(self, session: Session | None) -> None:
        if self.config.semantic and self.config.recall_limit and self.recall.embedder():
            try:
                self.recall.warm([e for _t, e in self.all_entries(session)])
            except Exception as exc:  # an unreadable store: the snapshot already warned
                self.context.logger.debug("file_memory: entry vectors not warmed: %s", exc)

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        with self._lock:
            return self._ensure_frozen(session).text()

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        # A user message starts a turn: the consolidation-failure allowance starts afresh.
        if message.role == "user":
            self.handler_for(session).failures.reset(session.id)

    @hookimpl
    def queue_prefetch(self, query: str, session: Session) -> None:
        # runs on the background worker: the vectors of entries written this turn, and the
        # message's own (a prefetch for the same text then needs no model call)
        self._warm(session)
        if self.config.semantic and self.config.recall_limit and query.strip():
            self.recall.prepare_query(query)

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        """The entries related to the user's message, ranked by words and meaning; nothing
        without an embedder (or with ``recall_limit: 0``), as before semantic ranking existed."""
        if not self.config.recall_limit or not query.strip() or self.recall.embedder() is None:
            return None  # no semantic ranking: nothing, at once
        hits, _problem = self.recall_entries(query, session, budget=self.config.recall_timeout)
        from .recall import render_recall

        return render_recall(hits) if hits else None

    @hookimpl
    def shutdown(self) -> None:
        self.recall.close()
        self._erasures.close()

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [self._tool]

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete every entry of MEMORY.md / USER.md mentioning ``subject`` (whole entries),
        and remove those entries from every version of the history: with scope ``all`` in the
        shared memory and every user's, with ``user:<key>`` (``memory.scope: user``) in that
        user's only."""
        from .versions import forget_in

        if scope == "all":
            owners = [("", self.store)] + [(key, self.user_store(key))
                                           for key in self._user_keys()]
        elif scope.startswith("user:") and self.per_user:
            owners = [(scope[len("user:"):], self.user_store(scope[len("user:"):]))]
        else:
            return ForgetReport(self.name, dry_run=dry_run, cannot_delete=(
                "MEMORY.md and USER.md are shared by every user of this home; forget with "
                "scope 'all' to delete from them"))
        report = forget_in(self.name, owners, subject, dry_run=dry_run)
        if not dry_run and report.deleted:
            self._forget_vectors()  # no vector of a forgotten entry stays behind
        return report

    def _forget_vectors(self) -> None:
        """Drop the vectors of entries no longer stored: keep those of every store still open."""
        stores = [self.store, *(h.store for h in self._handlers.values())]
        self.recall.forget([e for st in stores for t in TARGETS for e in st.entries(t)])

    def _user_keys(self) -> list[str]:
        """Every user key with a memory here (folders, or owners in the database)."""
        from .backend import user_keys

        return user_keys(self.context.home, self._storage_url)

    @hookimpl
    def on_erasure(self, generation: int) -> None:
        """Something was erased (maybe by another process): forget every frozen snapshot (each
        session freezes afresh from the stores at its next prompt, and takes a new erasure-log
        mark then: a turn still in flight keeps its own) and the vectors of entries no longer
        stored."""
        with self._lock:
            self._snapshots.clear()
            self._snapshot = None
        self._forget_vectors()

    # ------------------------------------------- the history and pins, for other plugins' use
    # (hermes-core inspect): thin calls into this plugin's library, so no plugin imports it

    def describe(self, store: MemoryStore) -> dict[str, Any]:
        """Both stores as data: entries (pinned or not), size against the limit, the newest
        version number (0: no version recorded) and any problem reading a file."""
        from .entries import joined_size, usage_label
        pins = _pins.read_pins(store)
        stores: dict[str, Any] = {}
        for target, state in store.read_many(TARGETS).items():
            size, limit = joined_size(state.entries), store.limit(target)
            stores[target] = {
                "file": store.path(target).name, "enabled": self.target_enabled(target),
                "entries": [{"text": e, "pinned": e in pins.get(target, [])}
                            for e in state.entries],
                "size": size, "limit": limit, "usage": usage_label(size, limit),
                "problem": state.problem}
        return {"version": store.history.newest() if store.history is not None else 0,
                "stores": stores}

    def edit(self, store: MemoryStore, action: str, target: str, *, content: str = "",
             old_text: str = "", origin: str) -> dict[str, Any]:
        """``add`` / ``replace`` / ``remove`` one entry of ``store`` as ``memory add`` does,
        recorded with ``origin``; a refusal raises :class:`MemoryRefused` naming the fix."""
        from .history import Provenance
        from .ops import ACTIONS, Operation

        if action not in ACTIONS:
            raise ValueError(f"unknown memory action {action!r}: add, replace or remove")
        result = store.apply(target, [Operation(action, content=content, old_text=old_text)],
                             by=Provenance(origin))
        return {"target": result.target, "written": result.written, "usage": result.usage,
                "entries": result.entries}

    def rollback(self, store: MemoryStore, number: int, *, origin: str) -> dict[str, Any]:
        """Put ``store`` back as it was right after version ``number`` (a new version)."""
        from .history import Provenance
        from .versions import rollback

        result = rollback(store, number, by=Provenance(origin))
        return dataclasses.asdict(result)

    def diff(self, store: MemoryStore, version: int, other: int | None = None
             ) -> list[dict[str, Any]]:
        """What ``version`` changed, or how the stores differ between two versions."""
        from .versions import version_diff

        return [d.to_dict() for d in version_diff(store.history, version, other)]

    pin = staticmethod(_pins.pin)
    unpin = staticmethod(_pins.unpin)
    pins = staticmethod(_pins.read_pins)

    @hookimpl
    def on_session_end(self, session: Session) -> None:
        """The session's frozen snapshot is let go (a server ending many sessions, an MCP
        server's expired ones, keeps none of them); then the optional background curator
        (``file_memory.curator``)."""
        with self._lock:
            self._snapshots.pop(session.id, None)
        from .background import maybe_curate

        maybe_curate(self.store, self.config.curator, self.context)


@hookimpl
def register_memory_providers(register: Any) -> None:
    register(FileMemory)


@hookimpl
def register_commands(register: Any) -> None:
    """``hermes-core memory ...``: this plugin's commands (see :mod:`.commands`)."""
    from .commands import memory

    register(memory)


@hookimpl
def doctor_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    """MEMORY.md and USER.md: readable, UTF-8, within their limits (see :mod:`.doctor`)."""
    from .doctor import memory_file_checks

    return memory_file_checks(home, config)


@hookimpl
def copy_storage(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    """``storage migrate``: every owner's memory, history and pins (see :mod:`.transfer`)."""
    from .transfer import copy_memory

    return copy_memory(source, target, progress)
