"""The frozen snapshot: what the system prompt shows of the two stores.

It is rendered once, when a session starts (and again after a compaction), and then returned
unchanged however the files change, so the system prompt's bytes — and the LLM provider's prompt
cache — stay stable for the whole session. The live entries are always on disk.

Entries are scanned again here because a file may have been edited by hand: an entry that matches a
threat pattern is replaced, in the snapshot only, by a notice naming the pattern; the file keeps the
original so the user (or the model, with ``remove``) can deal with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hermes_core import threats

from .entries import DELIMITER, dedupe, joined_size, usage_label
from .store import FILENAMES, TARGETS, MemoryStore

__all__ = ["HEADERS", "Snapshot", "load_snapshot", "render_block"]

_RULE = "═" * 46
HEADERS = {
    "memory": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
}
_BLOCKED_PREFIX = "[BLOCKED:"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The rendered blocks of one load, with what was found on the way."""

    #: target -> rendered block; a target with no entries has no block
    blocks: dict[str, str]
    #: target -> entries as loaded (deduplicated, unsanitised)
    entries: dict[str, list[str]]
    #: problems met while loading (unreadable files), one line each
    warnings: list[str] = field(default_factory=list)
    #: (target, pattern id) of every entry withheld from the prompt
    blocked: list[tuple[str, str]] = field(default_factory=list)
    #: the session the snapshot was frozen for
    session_id: str | None = None
    loaded_at: float = field(default_factory=time.time)

    def text(self) -> str | None:
        """Both blocks (memory first), or ``None`` when both stores are empty."""
        parts = [self.blocks[t] for t in TARGETS if t in self.blocks]
        return "\n\n".join(parts) if parts else None


def render_block(
    target: str, entries: list[str], limit: int, *, size: int | None = None
) -> str | None:
    """The prompt block of one store, or ``None`` when it has no entries.

    ``size`` is the usage shown in the header (default: that of ``entries``).
    """
    if not entries:
        return None
    size = joined_size(entries) if size is None else size
    header = f"{HEADERS[target]} [{usage_label(size, limit)} chars]"
    return f"{_RULE}\n{header}\n{_RULE}\n{DELIMITER.join(entries)}"


def _sanitise(target: str, entries: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    clean: list[str] = []
    blocked: list[tuple[str, str]] = []
    for entry in entries:
        finding = None if entry.startswith(_BLOCKED_PREFIX) else threats.scan(entry)
        if finding is None:
            clean.append(entry)
            continue
        blocked.append((target, finding.pattern))
        clean.append(
            f"{_BLOCKED_PREFIX} a {FILENAMES[target]} entry matched threat pattern "
            f"{finding.pattern} ({finding.category}) and was withheld from this prompt. Use "
            f"memory(action='remove', target='{target}') to delete it, or ask the user.]"
        )
    return clean, blocked


def load_snapshot(
    store: MemoryStore,
    *,
    targets: tuple[str, ...] = TARGETS,
    session_id: str | None = None,
) -> Snapshot:
    """Read the enabled ``targets`` from disk and render their frozen blocks.

    An unreadable or corrupt file counts as empty and adds a warning; nothing is raised.
    """
    blocks: dict[str, str] = {}
    loaded: dict[str, list[str]] = {}
    warnings: list[str] = []
    blocked: list[tuple[str, str]] = []
    states = store.read_many(targets)
    for target in targets:
        state = states[target]
        if state.problem is not None:
            warnings.append(
                f"{state.problem}; the {target} store is treated as empty for this session and "
                "writes to it are refused until the file is fixed"
            )
        entries = dedupe(state.entries)
        loaded[target] = entries
        shown, hits = _sanitise(target, entries)
        blocked += hits
        # The header shows the real usage: the budget counts the stored text, not the notices.
        block = render_block(target, shown, store.limit(target), size=joined_size(entries))
        if block is not None:
            blocks[target] = block
    return Snapshot(blocks, loaded, warnings, blocked, session_id)
