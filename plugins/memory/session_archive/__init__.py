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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.types import EndReason, Message, Session, SwitchReason, Usage

from .config import SessionArchiveConfig
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
    QueryError,
    SessionNotFoundError,
)
from .search import search_messages
from .spool import Spool
from .store import SessionArchive
from .tool import make_tool, session_search

__all__ = [
    "ArchiveBusyError",
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveFullError",
    "ArchiveReadOnlyError",
    "ArchiveVersionError",
    "ArchiveWriteError",
    "ImportFormatError",
    "QueryError",
    "SessionArchive",
    "SessionArchiveConfig",
    "SessionArchiveProvider",
    "SessionNotFoundError",
    "archive_path",
    "register_memory_providers",
    "search_messages",
    "session_search",
]


def archive_path(config: SessionArchiveConfig, home: Path) -> Path:
    """Where the archive lives: ``session_archive.path`` or ``<home>/state.db``."""
    return Path(config.path).expanduser() if config.path else Path(home) / "state.db"


class SessionArchiveProvider(MemoryProvider):
    """Stores every message in state.db and offers the session_search tool."""

    name = "session_archive"
    Config = SessionArchiveConfig
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
            self._archive = SessionArchive(
                self.path, busy_timeout=config.busy_timeout, synchronous=config.synchronous,
            )
        except ArchiveError as exc:
            # Started anyway, so no message is lost silently: each is kept in the spool and every
            # on_message raises this error to the turn, until the file is repaired.
            self.open_error = exc
            context.logger.error("%s", exc)
        self._tool = make_tool(lambda: self.archive, self._search_settings)

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
            llm = self.context.config.llm

            def summarise(results: list[dict[str, Any]], query: str) -> str | None:
                from .summarise import summarise_results  # only summaries pay for this import

                return summarise_results(results, query, llm, timeout=c.summary_timeout,
                                         concurrency=c.summary_concurrency,
                                         max_tokens=c.summary_max_tokens)

        return {"window_chars": c.window_chars, "candidates": c.candidates,
                "demote_platforms": tuple(c.demote_platforms), "summarise": summarise,
                "limit_default": c.max_sessions}

    # ---------------------------------------------------------------------------------- hooks

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        if self._archive is None:
            raise self._spool_unopened(session, message)
        # Raises ArchiveWriteError when the message could not be stored (it waits in the spool).
        self.archive.append_message(session, message)
        # The agent puts each model call's usage on the assistant message it produced; a copy
        # carried over by a compaction was counted in its own session already.
        usage = Usage.from_meta(message.meta.get("usage")) if message.role == "assistant" else None
        if usage is not None and "carried_over" not in message.meta:
            self.archive.record_usage(session.id, usage)

    def _spool_unopened(self, session: Session, message: Message) -> ArchiveWriteError:
        from .records import encode_message

        spool = Spool(spool_path(self.path))
        try:
            spool.add(session, encode_message(message)[0])
        except OSError as exc:
            return ArchiveWriteError(
                f"a message could NOT be stored: the session archive is unusable "
                f"({self.open_error}) and keeping it in {spool.path} failed too "
                f"({exc.strerror or exc})"
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
        self.archive.open_session(session)
        self.archive.end_session(session.id, str(getattr(reason, "value", reason)))

    @hookimpl
    def load_session(
        self, platform: str, conversation_key: str | None, session_id: str | None
    ) -> tuple[Session, list[Message]] | None:
        if self._archive is None:
            return None
        found = self.archive.resumable(platform, conversation_key, session_id)
        if found is None:
            return None
        record, stored = found
        session = Session(
            id=record.id, platform=record.platform, model=record.model, title=record.title,
            parent_session_id=record.parent_session_id, started_at=record.started_at,
            attributes=dict(record.attributes),
        )
        return session, [m.to_message() for m in stored]

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [self._tool]

    @hookimpl
    def shutdown(self) -> None:
        if self._archive is not None:
            self._archive.close()

    # ------------------------------------------------------------------------------- library

    def record_usage(self, session_id: str, usage: Usage, *, cost_usd: float = 0.0) -> None:
        """Add one API call's tokens (and cost) to the session's counters."""
        self.archive.record_usage(session_id, usage, cost_usd=cost_usd)


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    register(SessionArchiveProvider)
