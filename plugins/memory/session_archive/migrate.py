"""The session archive's part of ``hermes-core storage migrate`` (the ``copy_storage`` hook).

Sessions travel in the archive's own export format (JSON Lines, ``sessions export``), so what
arrives is exactly what ``sessions import`` would store: lossless, and sessions already in the
target are skipped, which makes an interrupted migration safe to run again. Message vectors
(semantic search) are not copied: ids change on the way and the target may use another model;
its background indexer embeds the copied messages again (or ``sessions reindex`` at once).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from hermes_core.config import validate_section
from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

from .config import SessionArchiveConfig
from .store import SessionArchive
from .transfer import ImportReport, export_lines, import_jsonl

__all__ = ["BATCH", "copy_archive", "copy_sessions", "import_file"]

#: sessions written per import batch (one temporary JSONL file each)
BATCH = 200
#: passes after the first over what a node wrote to the source meanwhile
PASSES = 3


def copy_archive(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    """Copy every session of ``source``'s archive into ``target``'s; the source is only read."""
    from . import archive_path

    settings = validate_section(source.config, "session_archive", SessionArchiveConfig,
                                plugin="session_archive")
    path = archive_path(settings, source.home)
    if not source.is_database and not path.exists():
        return _report(ImportReport(), 0, note=f"no archive at {path}")
    with ExitStack() as stack:
        # the source first: an unreachable database fails before a file is created
        source_archive = stack.enter_context(_open(source, settings))
        target_archive = stack.enter_context(_open(target, settings))
        out = ImportReport()
        vectors = copy_sessions(source_archive, target_archive, out,
                                progress=lambda done, total: progress("sessions", done, total))
    return _report(out, vectors)


def import_file(target: StorageSide, path: Path, dry_run: bool,
                progress: CopyProgress) -> CopyReport:
    """The ``import_sessions`` hook: the sessions of an export-format file into ``target``'s
    archive (SQLite file or PostgreSQL), skipping those already there."""
    from . import archive_path

    settings = validate_section(target.config, "session_archive", SessionArchiveConfig,
                                plugin="session_archive")
    total = path.stat().st_size
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress("sessions", done, total)

    progress("sessions", 0, total)
    with ExitStack() as stack:
        if dry_run and not target.is_database and not archive_path(settings, target.home).exists():
            # nothing is there yet: count against an empty archive, create no file in the home
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "state.db"
            archive = stack.enter_context(SessionArchive(scratch, background_checkpoints=False))
        else:
            archive = stack.enter_context(_open(target, settings))
        out = import_jsonl(archive, path, progress=advance, dry_run=dry_run)
    verb = "would import" if dry_run else "imported"
    return CopyReport(
        copied={"sessions": out.sessions_imported, "messages": out.messages_imported},
        skipped={"sessions": out.sessions_skipped},
        lines=[f"{verb} {out.sessions_imported} session(s), {out.messages_imported} message(s); "
               f"{out.sessions_skipped} already there"],
        detail={"skipped_ids": out.skipped_ids, "sessions_completed": out.sessions_completed,
                "dry_run": dry_run})


def _open(side: StorageSide, settings: SessionArchiveConfig) -> SessionArchive:
    from . import archive_path

    if side.url is not None:
        from .pg_store import PgSessionArchive

        return PgSessionArchive(side.url)
    return SessionArchive(archive_path(settings, side.home), background_checkpoints=False)


def _report(out: ImportReport, vectors: int, note: str | None = None) -> CopyReport:
    lines = [f"copied {out.sessions_imported} session(s), {out.messages_imported} message(s); "
             f"{out.sessions_skipped} already there" + (f" ({note})" if note else "")]
    if out.sessions_completed:
        lines.append(f"{out.sessions_completed} session(s) already there got the messages they "
                     "lacked (their conversation went on after they were copied)")
    if out.still_changing:
        lines.append("warning: the source archive was still being written when the copy ended "
                     "(a serve or chat process on it?); messages stored after that are not in "
                     "the target yet: stop every process writing to the source, then run "
                     "storage migrate again (it copies only what is missing)")
    if vectors:
        lines.append(f"semantic search: {vectors} message vector(s) not copied; the background "
                     "indexer embeds the copied messages again, or run 'hermes-core sessions "
                     "reindex' there to do it now")
    return CopyReport(
        copied={"sessions": out.sessions_imported, "messages": out.messages_imported},
        skipped={"sessions": out.sessions_skipped}, lines=lines,
        detail={"vectors_to_rebuild": vectors, "sessions_completed": out.sessions_completed,
                "source_still_changing": out.still_changing})


def copy_sessions(source: SessionArchive, target: SessionArchive, out: ImportReport, *,
                  progress: Callable[[int, int], None] | None = None) -> int:
    """Copy every session of ``source`` into ``target``, oldest first (a compaction's parent
    before its child), adding to ``out``; ``progress(done, total)`` after each batch. Returns
    how many message vectors the source holds (not copied: the target embeds again)."""
    vectors = int(source.db.read("SELECT count(*) FROM message_vectors")[0][0])
    mark = _marks(source)
    ids = [r[0] for r in source.db.read("SELECT id FROM sessions ORDER BY num")]
    total = len(ids)
    if progress is not None:
        progress(0, total)
    _copy(source, target, ids, out, progress)
    # A node may still be writing to the source: copy again what changed during the pass (new
    # sessions, and sessions with new messages, which the import completes), a few times.
    for _ in range(PASSES):
        since, mark = mark, _marks(source)
        changed = [r[0] for r in source.db.read(
            "SELECT id FROM sessions WHERE num > ? OR num IN (SELECT DISTINCT session FROM "
            "messages WHERE id > ?) ORDER BY num", since)]
        if not changed:
            return vectors
        _copy(source, target, changed, out, None)
    out.still_changing = True
    return vectors


def _marks(source: SessionArchive) -> tuple[int, int]:
    """The newest session and message of ``source`` (what was written after it is new)."""
    row = source.db.read("SELECT (SELECT coalesce(max(num), 0) FROM sessions), "
                         "(SELECT coalesce(max(id), 0) FROM messages)")[0]
    return int(row[0]), int(row[1])


def _copy(source: SessionArchive, target: SessionArchive, ids: list[str], out: ImportReport,
          progress: Callable[[int, int], None] | None) -> None:
    total = len(ids)
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
        out.sessions_imported += result.sessions_imported
        out.sessions_skipped += result.sessions_skipped
        out.messages_imported += result.messages_imported
        out.sessions_completed += result.sessions_completed
        if progress is not None:
            progress(min(start + BATCH, total), total)
