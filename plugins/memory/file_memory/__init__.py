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

import threading
from typing import Any

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.types import ForgetReport, Message, Session, SwitchReason

from .config import FileMemoryConfig
from .errors import MemoryRefused
from .history import Provenance
from .snapshot import Snapshot, load_snapshot
from .store import FILENAMES, TARGETS, MemoryStore
from .tool import MemoryToolHandler, build_tool

__all__ = [
    "FileMemory",
    "FileMemoryConfig",
    "MemoryRefused",
    "MemoryStore",
    "register_memory_providers",
]

#: switches after which the prompt is assembled afresh and the snapshot is re-read from disk
_REFREEZE = frozenset({SwitchReason.NEW, SwitchReason.RESUME, SwitchReason.COMPRESSION,
                       SwitchReason.RESET})


class FileMemory(MemoryProvider):
    """MEMORY.md / USER.md with a per-session frozen snapshot and the ``memory`` tool."""

    name = "file_memory"
    Config = FileMemoryConfig
    description = "MEMORY.md / USER.md notes with a frozen prompt snapshot and the memory tool"

    config: FileMemoryConfig

    def __init__(self, config: FileMemoryConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.store = MemoryStore(
            context.home / "memories",
            memory_limit=config.memory_char_limit,
            user_limit=config.user_char_limit,
            history_limit=config.history_limit,
        )
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self.handler = MemoryToolHandler(
            self.store,
            enabled=self.target_enabled,
            max_failures=config.max_consolidation_failures,
            notify=context.notify_memory_write,
            provider=self.name,
        )
        self._tool = build_tool(self.handler)

    # ------------------------------------------------------------------------------ helpers

    def target_enabled(self, target: str) -> bool:
        if target == "memory":
            return self.config.memory_enabled
        return target == "user" and self.config.user_profile_enabled

    def enabled_targets(self) -> tuple[str, ...]:
        return tuple(t for t in TARGETS if self.target_enabled(t))

    def live_entries(self, target: str) -> list[str]:
        """The entries on disk now (writes of this session included), duplicates dropped."""
        return self.store.entries(target)

    @property
    def snapshot(self) -> Snapshot | None:
        """The frozen snapshot of the current session, if one was taken."""
        return self._snapshot

    def freeze(self, session_id: str | None) -> Snapshot:
        """Read both files now and make the result the session's snapshot."""
        snap = load_snapshot(self.store, targets=self.enabled_targets(), session_id=session_id)
        for warning in snap.warnings:
            self.context.logger.warning("file_memory: %s", warning)
        for target, pattern in snap.blocked:
            self.context.logger.warning(
                "file_memory: a %s entry matched threat pattern %s and was left out of the "
                "system prompt; remove it with 'hermes-core memory remove --target %s ...'",
                target, pattern, target,
            )
        self._snapshot = snap
        return snap

    def _ensure_frozen(self, session_id: str) -> Snapshot:
        # Called with self._lock held. One freeze per session id, whichever of
        # system_prompt_block and on_session_switch arrives first (the switch runs on the
        # background worker, so the order is not fixed).
        snap = self._snapshot
        if snap is None or snap.session_id != session_id:
            snap = self.freeze(session_id)
        return snap

    # -------------------------------------------------------------------------------- hooks

    @hookimpl
    def on_session_switch(
        self, new_session: Session, old_session: Session | None, reason: SwitchReason
    ) -> None:
        with self._lock:
            snap = self._snapshot
            if reason == SwitchReason.BRANCH and old_session is not None and snap is not None:
                # A branch continues the same conversation under a new id: keep its prompt.
                if snap.session_id == old_session.id:
                    self._snapshot = Snapshot(
                        snap.blocks, snap.entries, snap.warnings, snap.blocked,
                        new_session.id, snap.loaded_at,
                    )
                return
            if old_session is None or reason in _REFREEZE:
                self._ensure_frozen(new_session.id)

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        with self._lock:
            return self._ensure_frozen(session.id).text()

    @hookimpl
    def on_message(self, message: Message, session: Session) -> None:
        # A user message starts a turn: the consolidation-failure allowance starts afresh.
        if message.role == "user":
            self.handler.failures.reset(session.id)

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [self._tool]

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete every entry of MEMORY.md / USER.md mentioning ``subject`` (whole entries),
        and remove those entries from every version of the history."""
        from .versions import forget_entries

        if scope != "all":
            return ForgetReport(self.name, dry_run=dry_run, cannot_delete=(
                "MEMORY.md and USER.md are shared by every user of this home; forget with "
                "scope 'all' to delete from them"))
        result = forget_entries(self.store, subject, dry_run=dry_run, by=Provenance("cli"))
        report = ForgetReport(
            self.name, matched=result.count, deleted=result.deleted, dry_run=dry_run,
            items=[f"{FILENAMES[t]}: {e if len(e) <= 100 else e[:97] + '...'}"
                   for t, entries in result.matched.items() for e in entries],
        )
        if result.version is not None:
            report.notes.append(f"recorded as memory version {result.version}")
        if result.history_redacted:
            report.notes.append(f"removed from {result.history_redacted} older version(s) of "
                                "the memory history")
        return report

    @hookimpl
    def on_session_end(self, session: Session) -> None:
        """The optional background curator (``file_memory.curator``)."""
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
