"""The built-in session archive: every session and message in ``state.db``, searchable.

Plugs into a turn through the memory hooks: ``on_message`` appends each message the moment it
joins the history, ``on_session_switch`` opens the next session (a compaction's child joins its
parent's chain), ``on_session_end`` records the end, ``get_tools`` offers ``session_search``, and
``load_session`` hands a stored conversation back to be resumed.
Token counters are added up from the ``meta["usage"]`` the agent loop puts on each assistant
message (one model call each); :meth:`SessionArchiveProvider.record_usage` adds other calls.

The library API is :class:`~.store.SessionArchive`; the CLI is ``hermes-core sessions``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl
from hermes_core.kinds import DeferredConfig, MemoryProvider, PluginContext, Tool
from hermes_core.types import EndReason, ForgetReport, Message, Session, SwitchReason, Usage

from .db import spool_path
from .errors import (
    ArchiveBusyError,
    ArchiveCorruptError,
    ArchiveError,
    ArchiveFullError,
    ArchiveReadOnlyError,
    ArchiveVersionError,
    ArchiveWriteError,
    ImportFormatError,
    MessageNotStored,
    QueryError,
    SessionNotFoundError,
)
from .search import search_messages
from .store import SessionArchive

if TYPE_CHECKING:
    from hermes_core.config import LoadedConfig
    from hermes_core.doctor import DoctorCheck
    from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

    from .config import SessionArchiveConfig
    from .tool import Semantic, session_search

__all__ = [
    "ArchiveBusyError",
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveFullError",
    "ArchiveReadOnlyError",
    "ArchiveVersionError",
    "ArchiveWriteError",
    "ImportFormatError",
    "MessageNotStored",
    "QueryError",
    "SessionArchive",
    "SessionArchiveConfig",
    "SessionArchiveProvider",
    "SessionNotFoundError",
    "archive_path",
    "copy_storage",
    "doctor_checks",
    "open_archive",
    "register_memory_providers",
    "search_messages",
    "session_search",
]

#: names of ``__all__`` imported on first use: their modules define pydantic models, which an
#: import of the archive (``sessions`` commands, a library user) does not pay for until a config
#: is validated or the tool is built
_DEFERRED = {"SessionArchiveConfig": "config", "session_search": "tool"}


def __getattr__(name: str) -> Any:
    if name not in _DEFERRED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_DEFERRED[name]}"), name)
    globals()[name] = value
    return value


def archive_path(config: SessionArchiveConfig, home: Path) -> Path:
    """Where the archive lives: ``session_archive.path`` or ``<home>/state.db``."""
    return Path(config.path).expanduser() if config.path else Path(home) / "state.db"


def open_archive(
    config: SessionArchiveConfig, home: Path, storage_url: str | None = None
) -> SessionArchive:
    """The archive the configuration selects: PostgreSQL when ``storage.url`` (or
    ``$HERMES_CORE_STORAGE_URL``) is set, else the SQLite file; never a silent fallback."""
    from hermes_core.storage import resolve_storage_url

    url = resolve_storage_url(storage_url)
    if url is not None:
        from .store import PgSessionArchive

        return PgSessionArchive(url)
    return SessionArchive(archive_path(config, home), busy_timeout=config.busy_timeout,
                          synchronous=config.synchronous)


class SessionArchiveProvider(MemoryProvider):
    """Stores every message in state.db and offers the session_search tool."""

    name = "session_archive"
    Config = DeferredConfig(f"{__name__}.config", "SessionArchiveConfig")
    description = "every session and message in state.db, with FTS5 search (session_search)"

    def __init__(self, config: SessionArchiveConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.settings: SessionArchiveConfig = config
        self.path = archive_path(config, context.home)
        #: why the archive could not be opened (a damaged or foreign file, a full disk), or None
        self.open_error: ArchiveError | None = None
        self._archive: SessionArchive | None = None
        try:
            # Opening raises a clear error for a corrupt or foreign file, and never modifies it.
            storage = getattr(context.config, "storage", None)
            self._archive = open_archive(config, context.home, getattr(storage, "url", None))
        except ArchiveError as exc:
            # Started anyway, so no message is lost silently: each is kept in the spool and every
            # on_message raises this error to the turn, until the file is repaired.
            self.open_error = exc
            context.logger.error("%s", exc)
        from hermes_core.storage import resolve_storage_url
        from hermes_core.storage.erasure_log import ErasureLog

        from .forget import LateForgets

        url = resolve_storage_url(getattr(storage, "url", None))
        #: forgets landing while a turn is in flight (see :class:`.forget.LateForgets`)
        self.late_forgets = LateForgets(ErasureLog(context.home, url))
        from .tool import make_tool

        self._tool = make_tool(lambda: self.archive, self._search_settings)
        self._semantic: Semantic | None = None
        self._semantic_lock = threading.Lock()
        self._semantic_later: threading.Thread | None = None
        self._closing = threading.Event()
        self._indexer: Any = None
        #: the derivation lane (session_archive.derive), or None when off
        self.deriver: Any = self._start_deriver() if config.derive else None

    def _start_deriver(self) -> Any:
        """The derivation lane; a ConfigError when ``derive`` is on and no model client can be
        built (checked now, not at the first turn)."""
        from hermes_core.errors import ConfigError

        from .derive import Deriver

        try:
            client = self.context.llm("auxiliary")
        except Exception as exc:
            raise ConfigError(
                f"session_archive.derive is on but no model client can be built ({exc}); "
                "configure llm.client (or llm.auxiliary_client) and its model, or set "
                "session_archive.derive: false") from exc
        c = self.settings
        return Deriver(lambda: self.archive, client, self.context.run_later,
                       embedder=lambda: self.semantic(block=True).embedder,
                       timeout=c.derive_timeout, max_tokens=c.derive_max_tokens,
                       context_facts=c.derive_context_facts,
                       erasures=self.late_forgets.erasures)

    def semantic(self, *, block: bool = False) -> Semantic:
        """Semantic search's parts, set up on first use: the kernel's embedder (``None`` when
        ``embeddings.embedder`` is ``none`` or nothing is installed), the vector index and the
        background indexer. Never raises: what is missing becomes ``Semantic.problem``.

        While a turn is in flight the set-up (numpy, the embedder, the indexer: a few hundred
        milliseconds) is not done on the caller's thread (unless ``block``: background work): it
        starts on a thread of its own once turns pause, and meanwhile the answer is a
        ``Semantic`` without parts saying so (the search goes on by words)."""
        if self._semantic is not None:
            return self._semantic
        from hermes_core.embeddings import turns_running

        if not block and turns_running():
            return self._set_up_later()
        with self._semantic_lock:
            if self._semantic is None:
                self._semantic = self._start_semantic()
        return self._semantic

    def _set_up_later(self) -> Semantic:
        from .tool import Semantic

        with self._semantic_lock:
            if self._semantic_later is None and not self._closing.is_set():
                self._semantic_later = threading.Thread(
                    target=self._set_up_when_paused, daemon=True, name="archive-semantic-start")
                self._semantic_later.start()
        return Semantic(problem="semantic search is starting (it loads once turns pause); "
                                "word search meanwhile")

    def _set_up_when_paused(self) -> None:
        from hermes_core.embeddings import wait_until_paused

        if wait_until_paused(self._closing):
            with self._semantic_lock:
                if self._semantic is None and not self._closing.is_set():
                    self._semantic = self._start_semantic()

    def _start_semantic(self) -> Semantic:
        from .tool import Semantic

        try:
            embedder = self.context.embedder()
        except Exception as exc:  # a broken embedder choice must not break the archive
            return Semantic(problem=f"semantic search is off: {exc}")
        if embedder is None:
            from hermes_core.embeddings import off_reason

            return Semantic(problem=off_reason(self.context.config))
        try:
            from .vector_index import VectorIndex
            from .vectors import VectorIndexer
        except ImportError as exc:
            from hermes_core.embeddings import INSTALL_HINT

            return Semantic(problem=f"semantic search is off: {exc.name} is missing "
                                    f"({INSTALL_HINT})")
        batch = self.context.config.embeddings.batch_size
        self._indexer = VectorIndexer(self.archive, embedder, batch=batch)
        self._indexer.wake()  # messages stored before (or by another process) get vectors too
        index = VectorIndex(self.archive, in_memory=self.settings.vectors_in_memory)
        # reading the stored vectors takes ~1.5 s per 100k: do it now, not on the first search
        threading.Thread(target=self._warm, args=(index, embedder.dimension), daemon=True,
                         name="archive-vectors-load").start()
        return Semantic(embedder=embedder, index=index)

    def _warm(self, index: Any, dimension: int) -> None:
        from hermes_core.embeddings import wait_until_paused

        if not wait_until_paused(self._closing):  # a search meanwhile reads what it needs
            return
        try:
            index.refresh(dimension)
        except Exception as exc:  # a closed archive at shutdown: the next search retries
            self.context.logger.debug("vector index not preloaded: %s", exc)

    @property
    def archive(self) -> SessionArchive:
        """The open archive; raises the open error when it could not be opened."""
        if self._archive is None:
            assert self.open_error is not None
            raise self.open_error
        return self._archive

    def _search_settings(self) -> dict[str, Any]:
        c = self.settings
        summarise: Callable[[list[dict[str, Any]], str], str | None] | None = None
        if c.summaries:

            def summarise(results: list[dict[str, Any]], query: str) -> str | None:
                from .summarise import summarise_results  # only summaries pay for this import

                try:
                    client: Any = self.context.llm("auxiliary")
                except Exception as exc:  # an unknown client name: excerpts, with the reason
                    return f"summaries are off ({exc}), so excerpts are shown"
                return summarise_results(results, query, client, timeout=c.summary_timeout,
                                         concurrency=c.summary_concurrency,
                                         max_tokens=c.summary_max_tokens)

        scope = getattr(getattr(self.context.config, "memory", None), "scope", "global")
        semantic = self.semantic()
        facts: Callable[[str, str | None, str | None], list[dict[str, Any]]] | None = None
        if c.derive:

            def facts(query: str, user: str | None, current: str | None) -> list[dict[str, Any]]:
                from .fact_search import search_facts

                return search_facts(self.archive, query, user=user, current_session_id=current,
                                    embedder=semantic.embedder)

        return {"window_chars": c.window_chars, "candidates": c.candidates,
                "demote_platforms": tuple(c.demote_platforms), "summarise": summarise,
                "limit_default": c.max_sessions, "per_user": scope == "user",
                "result_chars": c.result_chars, "semantic": semantic, "facts": facts}

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until every stored message that gets a vector has one (the background indexer is
        idle with nothing pending) and the vector index has read them; False when that did not
        happen within ``timeout`` seconds (``hermes-core eval`` calls this after ingest). True at
        once when semantic search is off."""
        sem = self.semantic(block=True)
        if self._indexer is None or sem.index is None:
            return True
        done = bool(self._indexer.wait_done(timeout))
        if done:
            sem.index.refresh(sem.embedder.dimension)
        return done

    # ---------------------------------------------------------------------------------- hooks

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        if self._archive is None:
            raise self._spool_unopened(session, message)
        # The agent puts each model call's usage on the assistant message it produced; a copy
        # carried over by a compaction was counted in its own session already.
        usage = Usage.from_meta(message.meta.get("usage")) if message.role == "assistant" else None
        if "carried_over" in message.meta:
            usage = None
        # Raises ArchiveWriteError when the message could not be stored (it waits in the spool).
        self.archive.append_message(session, message, usage=usage)
        self.late_forgets.after_write(self.archive, session, message)
        if message.role in ("user", "assistant"):
            self.semantic()
            if self._indexer is not None:
                self._indexer.wake()  # an event: embedding happens on the indexer's thread
        if self.deriver is not None and message.role == "assistant" and not message.tool_calls:
            self.deriver.wake()  # the turn settled: derivation runs on the background lane

    def _spool_unopened(self, session: Session, message: Message) -> ArchiveWriteError:
        from hermes_core.storage.spool import Spool

        from .records import encode_message, spool_record

        spool = Spool(spool_path(self.path))
        try:
            spool.append(spool_record(session, encode_message(message)[0]))
        except OSError as exc:
            return MessageNotStored(
                f"a message could NOT be stored: the session archive is unusable "
                f"({self.open_error}) and keeping it in {spool.path} failed too "
                f"({exc.strerror or exc}). Send it again once the archive opens."
            )
        return ArchiveWriteError(
            f"a message could not be stored: the session archive is unusable "
            f"({self.open_error}). It was kept in {spool.path} and will be stored once the "
            "archive opens again"
        )

    @hookimpl
    def on_session_switch(
        self, new_session: Session, old_session: Session | None, reason: SwitchReason
    ) -> None:
        if self._archive is None:
            return  # on_message reports the unusable archive on every message
        origin = str(reason.value if isinstance(reason, SwitchReason) else reason)
        self.late_forgets.inherit(new_session.id, old_session.id if old_session else None)
        created = self.archive.open_session(new_session, origin=origin)
        if not created and origin == SwitchReason.RESUME.value:
            self.archive.reopen_session(new_session.id)
        if origin == SwitchReason.COMPRESSION.value and old_session is not None:
            self.archive.open_session(old_session)
            self.archive.end_session(old_session.id, EndReason.COMPRESSION.value)

    @hookimpl
    def on_session_end(self, session: Session, reason: EndReason) -> None:
        if self._archive is None:
            return
        self.late_forgets.ended(session.id)
        self.archive.open_session(session)
        self.archive.end_session(session.id, str(getattr(reason, "value", reason)))

    @hookimpl
    def load_session(
        self, platform: str, conversation_key: str | None, session_id: str | None
    ) -> tuple[Session, list[Message]] | None:
        if self._archive is None:
            return None
        mark = self.late_forgets.mark()  # read before the history: see .forget.LateForgets
        found = self.archive.resumable(platform, conversation_key, session_id)
        if found is None:
            return None
        record, stored = found
        self.late_forgets.loaded(record.id, mark)
        session = Session(
            id=record.id, platform=record.platform, model=record.model, title=record.title,
            parent_session_id=record.parent_session_id, started_at=record.started_at,
            attributes=dict(record.attributes),
        )
        return session, [m.to_message() for m in stored]

    @hookimpl
    def prefetch(self, query: str, session: Session) -> str | None:
        """With ``session_archive.prefetch: true``: the best hits of earlier conversations for
        the user's message, by the same search as session_search (hybrid when an embedder is
        active), at most ``prefetch_chars`` characters. None when off or nothing matches."""
        if not self.settings.prefetch or self._archive is None or not query.strip():
            return None
        from .tool import prefetch_text

        options = self._search_settings()
        if options.get("per_user"):
            options["user"] = session.user_id or ""
        return prefetch_text(self.archive, query, session.id, options,
                             sessions=self.settings.prefetch_sessions,
                             chars=self.settings.prefetch_chars)

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [self._tool]

    @hookimpl
    def shutdown(self) -> None:
        self._closing.set()
        if self.deriver is not None:
            self.deriver.close()
        if self._indexer is not None:
            self._indexer.close()
        if self._archive is not None:
            self._archive.close()
        self.late_forgets.erasures.close()

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete every stored message mentioning ``subject`` (and clear such titles); the
        FTS5 index follows through the schema's triggers. See :mod:`.forget`."""
        from .forget import count_messages, forget_messages

        found = forget_messages(self.archive, subject, scope=scope, dry_run=dry_run)
        total = count_messages(self.archive, scope) + len(found.titles) if dry_run else None
        items = [f"message {mid} ({role}) of session {sid}: {preview}"
                 for mid, sid, role, preview in found.messages[:50]]
        if len(found.messages) > 50:
            items.append(f"... and {len(found.messages) - 50} more messages")
        items += [f"title of session {sid}" for sid in found.titles]
        items += [f"message not stored yet ({role}) of session {sid}: {preview}"
                  for sid, role, preview in found.pending]
        items += found.aside
        items += [f"derived fact {fid} of session {sid}: {text[:100]}"
                  for fid, sid, text in found.facts[:50]]
        return ForgetReport(self.name, matched=found.matched, deleted=found.deleted,
                            dry_run=dry_run, items=items, total=total)

    # ------------------------------------------------------------------------------- library

    def record_usage(self, session_id: str, usage: Usage, *, cost_usd: float = 0.0) -> None:
        """Add one API call's tokens (and cost) to the session's counters."""
        self.archive.record_usage(session_id, usage, cost_usd=cost_usd)


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    register(SessionArchiveProvider)


@hookimpl
def register_commands(register: Any) -> None:
    """``hermes-core sessions ...``: this plugin's commands (see :mod:`.commands`)."""
    from .commands import sessions

    register(sessions)


@hookimpl
def doctor_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    """The archive file: readable, sound, of a known schema, and its spooled messages."""
    from .doctor import archive_checks

    return archive_checks(home, config)


@hookimpl
def copy_storage(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    """``storage migrate``: every session, in the export format (see :mod:`.migrate`)."""
    from .migrate import copy_archive

    return copy_archive(source, target, progress)


@hookimpl
def import_sessions(target: StorageSide, path: Path, dry_run: bool, progress: CopyProgress
                    ) -> CopyReport:
    """An importer's sessions (export format) into this home's archive (see :mod:`.migrate`)."""
    from .migrate import import_file

    return import_file(target, path, dry_run, progress)
