"""Moving a home's data into the ``storage.url`` database (``hermes-core storage migrate``).

The library half of the command; the click layer (``hermes_core.cli.storage_cmd``) opens the
stores and calls each store's own copy (the plugins' ``transfer`` modules). Sessions travel in
the archive's own export format (JSON Lines, ``sessions export``), so what arrives is exactly
what ``sessions import`` would store: lossless, and sessions already in the target are skipped,
which makes an interrupted migration safe to run again. The other stores follow the same rule:
curated memory (its history and pins too) only into owners and documents that are empty in the
target, skills only under names the target lacks, the lossless engine's spans only for
conversations the target has none of; what was left alone is named in the report. Message
vectors (semantic search) are not copied: the target's background indexer embeds the copied
messages again (or ``hermes-core sessions reindex`` does it at once, with a progress bar).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MigrationReport", "copy_sessions"]

#: sessions written per import batch (one temporary JSONL file each)
BATCH = 200


@dataclass
class MigrationReport:
    sessions_copied: int = 0
    sessions_skipped: int = 0
    messages_copied: int = 0
    #: "<owner>/<target>" of each memory document copied, and of those left alone
    memory_copied: list[str] = field(default_factory=list)
    memory_kept: list[str] = field(default_factory=list)
    #: versions of the memory history copied, and pins added
    memory_versions_copied: int = 0
    memory_pins_copied: int = 0
    #: skill names copied, and names the target already held with other text
    skills_copied: list[str] = field(default_factory=list)
    skills_kept: list[str] = field(default_factory=list)
    #: the lossless engine's archive: conversations and spans copied, spans given a new id,
    #: conversations left alone (the target already had spans of them)
    lossless_conversations_copied: int = 0
    lossless_spans_copied: int = 0
    lossless_spans_renumbered: int = 0
    lossless_conversations_kept: int = 0
    #: the lossless archive's message vectors in the source: not copied, rebuilt by the
    #: target's background indexer the first time the engine runs there
    lossless_vectors_to_rebuild: int = 0
    #: message vectors (semantic search) in the source: not copied, the target re-embeds them
    #: (its background indexer, or ``hermes-core sessions reindex``)
    vectors_to_rebuild: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def copy_sessions(
    source: Any, target: Any, *, export_lines: Callable[[Any, str], Any],
    import_jsonl: Callable[..., Any], report: MigrationReport,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Copy every session of archive ``source`` into archive ``target``, oldest first (a
    compaction's parent before its child); ``progress(done, total)`` after each batch."""
    ids = [r[0] for r in source.db.read("SELECT id FROM sessions ORDER BY num")]
    # vectors stay behind: ids change on the way, and the target may use another model
    report.vectors_to_rebuild += int(source.db.read("SELECT count(*) FROM message_vectors")[0][0])
    total = len(ids)
    if progress is not None:
        progress(0, total)
    for start in range(0, total, BATCH):
        batch = ids[start : start + BATCH]
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".jsonl",
                                         delete=False) as handle:
            for sid in batch:
                for line in export_lines(source, sid):
                    handle.write(line + "\n")
            path = Path(handle.name)
        try:
            result = import_jsonl(target, path)
        finally:
            path.unlink(missing_ok=True)
        report.sessions_copied += result.sessions_imported
        report.sessions_skipped += result.sessions_skipped
        report.messages_copied += result.messages_imported
        if progress is not None:
            progress(min(start + BATCH, total), total)
