"""The session archive's part of ``hermes-core storage migrate`` (the ``copy_storage`` hook).

Sessions travel in the archive's own export format (JSON Lines, ``sessions export``), so what
arrives is exactly what ``sessions import`` would store: lossless, and sessions already in the
target are skipped, which makes an interrupted migration safe to run again.

Message vectors (semantic search) are copied, not embedded again (:func:`copy_vectors`): ids
change on the way, so each copied message is paired with its source message by session and
position, and takes the source's vector only when its role and text are the same. A target that
holds another model's vectors gets none (its indexer or ``sessions reindex`` embeds them).
Derived facts travel the same way, with their sources and the derivation's cursor
(:func:`copy_facts`, below). A SQLite target then gets the kept best messages of its commonest
words (impacts.py), which its one-word searches read instead of scoring every match.

Derived memory travels with the sessions it was read from. The facts (facts.py) are what the
auxiliary model read from settled turns, paid for in model tokens; a migration that left them
behind would lose them, or pay again to derive them on the target. :func:`copy_facts` runs after
the sessions are copied. Message ids change on the way, so each source message is paired with the
target message at the same position of the same session, with the same role and text (as the
vectors are); a fact is copied with its kind, topic, text, validity, model and vector, linked to
the paired messages, and what superseded it is linked again once every fact is in. A fact none of
whose source messages has a twin is not copied (its evidence is not there). A session whose facts
are already in the target (a second run) is skipped.

The target's derivation cursor (``facts_through``) then moves over the copied messages the source
had already considered, as far as that holds for every message in between, so the target does
not ask the model again about turns whose facts were copied.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_core.config import validate_section
from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

from .config import SessionArchiveConfig
from .facts import derivation_state
from .impacts import rebuild
from .store import SessionArchive
from .transfer import ImportReport, export_lines, import_jsonl
from .vector_store import vector_store
from .vectors import TEXT_CHARS

__all__ = ["BATCH", "FactCopy", "copy_archive", "copy_facts", "copy_sessions", "copy_vectors",
           "import_file", "twins"]

#: sessions per batch: written per import (one temporary JSONL file each), read per round trip
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
        return _report(ImportReport(), note=f"no archive at {path}")
    with ExitStack() as stack:
        # the source first: an unreachable database fails before a file is created
        source_archive = stack.enter_context(_open(source, settings))
        target_archive = stack.enter_context(_open(target, settings))
        out = ImportReport()
        copy_sessions(source_archive, target_archive, out,
                      progress=lambda done, total: progress("sessions", done, total))
        vectors = copy_vectors(source_archive, target_archive,
                               progress=lambda done, total: progress("vectors", done, total))
        facts = copy_facts(source_archive, target_archive,
                           progress=lambda done, total: progress("facts", done, total))
        if target_archive.backend == "sqlite":  # the best messages of the commonest words
            rebuild(target_archive)
    return _report(out, vectors, facts=facts)


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
        from .store import PgSessionArchive

        return PgSessionArchive(side.url)
    return SessionArchive(archive_path(settings, side.home), background_checkpoints=False)


def _report(out: ImportReport, vectors: VectorCopy | None = None,
            note: str | None = None, facts: FactCopy | None = None) -> CopyReport:
    vectors = vectors or VectorCopy()
    facts = facts or FactCopy()
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
    if vectors.copied or vectors.already:
        lines.append(f"semantic search: {vectors.copied} message vector(s) copied"
                     + (f", {vectors.already} already there" if vectors.already else ""))
    if vectors.problem:
        lines.append(f"semantic search: {vectors.problem}")
    if facts.copied or facts.already or facts.not_copied:
        lines.append(f"derived memory: {facts.copied} fact(s) copied with their sources"
                     + (f", {facts.already} already there" if facts.already else "")
                     + (f"; {facts.not_copied} left behind (none of their source messages is "
                        "in the target)" if facts.not_copied else ""))
    return CopyReport(
        copied={"sessions": out.sessions_imported, "messages": out.messages_imported,
                "vectors": vectors.copied, "facts": facts.copied},
        skipped={"sessions": out.sessions_skipped, "vectors": vectors.already,
                 "facts": facts.already}, lines=lines,
        detail={"vectors_copied": vectors.copied, "vectors_to_rebuild": vectors.not_copied,
                "facts_not_copied": facts.not_copied, "facts_through": facts.through,
                "sessions_completed": out.sessions_completed,
                "source_still_changing": out.still_changing})


def copy_sessions(source: SessionArchive, target: SessionArchive, out: ImportReport, *,
                  progress: Callable[[int, int], None] | None = None) -> None:
    """Copy every session of ``source`` into ``target``, oldest first (a compaction's parent
    before its child), adding to ``out``; ``progress(done, total)`` after each batch."""
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
            return
        _copy(source, target, changed, out, None)
    out.still_changing = True


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


@dataclass
class VectorCopy:
    """What :func:`copy_vectors` did."""

    copied: int = 0
    #: target messages that had their vector already (a second run)
    already: int = 0
    #: source vectors with no target message to go to (or all of them, after a problem)
    not_copied: int = 0
    #: why no vector was copied, with what to run (None: nothing stood in the way)
    problem: str | None = None


_PAIRS_SQL = (
    "SELECT s.id, m.id, m.role, substr(m.content, 1, {chars}), {vec} FROM messages AS m "
    "JOIN sessions AS s ON s.num = m.session {join}WHERE s.id IN ({marks}) ORDER BY s.id, m.id")


def copy_vectors(source: SessionArchive, target: SessionArchive, *,
                 progress: Callable[[int, int], None] | None = None) -> VectorCopy:
    """Give each message of ``target`` the vector its twin in ``source`` has (same session,
    same position, same role and text), :data:`BATCH` sessions at a time; nothing is embedded.
    Run after the sessions were copied; a second run copies only what is missing."""
    out = VectorCopy()
    src, dst = vector_store(source), vector_store(target)
    meta = src.meta()
    model, dimension = meta.get("vectors_model"), meta.get("vectors_dimension")
    total = src.count()
    if not total or model is None or dimension is None:
        return out
    theirs = dst.meta(exists=True)
    if theirs.get("exists") == "1" and theirs.get("vectors_model") not in (None, model):
        out.not_copied = total
        out.problem = (f"{total} message vector(s) not copied: the target's vectors were made "
                       f"by {theirs.get('vectors_model')}, these by {model}; the target's "
                       "indexer keeps its own model ('hermes-core sessions reindex' there "
                       "rebuilds them all)")
        return out
    ids = [str(r[0]) for r in source.db.read(
        "SELECT DISTINCT s.id FROM message_vectors AS v JOIN messages AS m ON m.id = v.id "
        "JOIN sessions AS s ON s.num = m.session ORDER BY s.id")]
    for start in range(0, len(ids), BATCH):
        batch = ids[start:start + BATCH]
        marks = ",".join("?" * len(batch))
        have = source.db.read(_PAIRS_SQL.format(
            chars=TEXT_CHARS, vec="v.vec", marks=marks,
            join="LEFT JOIN message_vectors AS v ON v.id = m.id "), tuple(batch))
        mine = target.db.read(_PAIRS_SQL.format(
            chars=TEXT_CHARS, vec="EXISTS (SELECT 1 FROM message_vectors AS v WHERE v.id = "
            "m.id)", marks=marks, join=""), tuple(batch))
        blobs = _pairs(have, mine, out)
        if blobs:
            def tx(con: Any, blobs: list[tuple[int, bytes, str]] = blobs) -> None:
                if dst.meta(con).get("vectors_model") is None:
                    dst.set_meta(con, "vectors_model", str(model))
                    dst.set_meta(con, "vectors_dimension", str(dimension))
                dst.put(con, blobs, TEXT_CHARS, str(model))

            dst._write(None, tx)
            out.copied += len(blobs)
        if progress is not None:
            progress(min(start + BATCH, len(ids)), len(ids))
    out.not_copied = max(0, total - out.copied - out.already)
    return out


def _pairs(have: list[Any], mine: list[Any], out: VectorCopy) -> list[tuple[int, bytes, str]]:
    """(target id, vector, text) for each target message whose source twin has a vector."""
    blobs: list[tuple[int, bytes, str]] = []
    for (_sid, _id, role, text, vec), (_s, target_id, t_role, t_text, stored) in twins(have, mine):
        if vec is None or (t_role, t_text) != (role, text):
            continue
        if stored:
            out.already += 1
            continue
        blobs.append((int(target_id), bytes(vec), str(t_text)))
    return blobs


_PAIRS = ("SELECT s.id, m.id, m.role, m.content FROM messages AS m JOIN sessions AS s "
          "ON s.num = m.session WHERE s.id IN ({marks}) ORDER BY s.id, m.id")


@dataclass
class FactCopy:
    """What :func:`copy_facts` did."""

    copied: int = 0
    #: facts of sessions whose facts the target had already
    already: int = 0
    #: facts left behind: none of their source messages has a twin in the target
    not_copied: int = 0
    #: the target's derivation cursor after the copy (None: not moved)
    through: int | None = None


def copy_facts(source: SessionArchive, target: SessionArchive, *,
               progress: Callable[[int, int], None] | None = None) -> FactCopy:
    """Copy the facts of every session both archives hold (see the module docstring)."""
    out = FactCopy()
    sessions = [str(r[0]) for r in source.db.read(
        "SELECT DISTINCT s.id FROM facts AS f JOIN sessions AS s ON s.num = f.session "
        "ORDER BY s.id")]
    twin: dict[int, int] = {}  # source message id -> target message id
    fact_ids: dict[int, int] = {}  # source fact id -> target fact id
    superseded: list[tuple[int, int, float | None]] = []
    for start in range(0, len(sessions), BATCH):
        batch = sessions[start:start + BATCH]
        twin.update(_twins(source, target, batch))
        nums = {str(sid): int(num) for sid, num in target.read_in(
            "SELECT id, num FROM sessions WHERE id IN ({marks})", batch)}
        done = {str(r[0]) for r in target.read_in(
            "SELECT DISTINCT s.id FROM facts AS f JOIN sessions AS s ON s.num = f.session "
            "WHERE s.id IN ({marks})", batch)}
        rows = source.read_in(
            "SELECT f.id, s.id, f.user_id, f.kind, f.topic, f.text, f.valid_from, "
            "f.created_at, f.superseded_by, f.superseded_at, f.model, f.vec FROM facts AS f "
            "JOIN sessions AS s ON s.num = f.session WHERE s.id IN ({marks}) ORDER BY f.id",
            batch)
        sources = _sources(source, [int(r[0]) for r in rows])
        todo = []
        for row in rows:
            if str(row[1]) in done:
                out.already += 1
            elif str(row[1]) not in nums or not [m for m in sources.get(int(row[0]), [])
                                                   if m in twin]:
                out.not_copied += 1
            else:
                todo.append(row)
        if todo:
            fact_ids.update(target._write(functools.partial(
                _insert, rows=todo, nums=nums, sources=sources, twin=twin)))
            out.copied += len(todo)
            superseded += [(int(r[0]), int(r[8]), r[9]) for r in todo if r[8] is not None]
        if progress is not None:
            progress(min(start + BATCH, len(sessions)), len(sessions))
    links = [(fact_ids[new], at, fact_ids[old]) for old, new, at in superseded
             if old in fact_ids and new in fact_ids]
    if links:
        target._write(lambda con: con.executemany(
            "UPDATE facts SET superseded_by = ?, superseded_at = ? WHERE id = ?", links))
    out.through = _move_cursor(source, target)
    return out


def twins(source_rows: Sequence[Sequence[Any]], target_rows: Sequence[Sequence[Any]],
          ) -> Iterator[tuple[Sequence[Any], Sequence[Any]]]:
    """(source row, target row) for each message at the same position of the same session in
    both archives; rows start with the session id and come in message order within a session.
    A copied message is found this way (its id differs on the target): the callers check that
    what they need of it (role, text) is the same."""
    theirs: dict[str, list[Sequence[Any]]] = {}
    for row in target_rows:
        theirs.setdefault(str(row[0]), []).append(row)
    position: dict[str, int] = {}
    for row in source_rows:
        sid = str(row[0])
        k = position[sid] = position.get(sid, -1) + 1
        same_session = theirs.get(sid, [])
        if k < len(same_session):
            yield row, same_session[k]


def _twins(source: SessionArchive, target: SessionArchive, sessions: list[str]) -> dict[int, int]:
    """Source message id -> target message id, for the messages of ``sessions`` that stand at
    the same position of the same session in both, with the same role and text."""
    return {int(mine[1]): int(theirs[1]) for mine, theirs in twins(
        source.read_in(_PAIRS, sessions), target.read_in(_PAIRS, sessions))
        if tuple(mine[2:]) == tuple(theirs[2:])}


def _sources(source: SessionArchive, facts: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for fid, mid in source.read_in("SELECT fact, message FROM fact_sources WHERE fact IN "
                                   "({marks}) ORDER BY message", facts):
        out.setdefault(int(fid), []).append(int(mid))
    return out


def _insert(con: Any, rows: list[Any], nums: dict[str, int], sources: dict[int, list[int]],
            twin: dict[int, int]) -> dict[int, int]:
    """Insert ``rows`` (superseded links come later) with their paired sources; old -> new id."""
    ids: dict[int, int] = {}
    for (fid, sid, user, kind, topic, text, valid_from, created_at, _by, _at, model,
         vec) in rows:
        cur = con.execute(
            "INSERT INTO facts(session, user_id, kind, topic, text, valid_from, created_at, "
            "model, vec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (nums[str(sid)], user, kind, topic, text, valid_from, created_at, model,
             None if vec is None else bytes(vec)))
        new = int(cur.lastrowid)
        ids[int(fid)] = new
        con.executemany("INSERT INTO fact_sources(fact, message) VALUES (?, ?)",
                        [(new, twin[m]) for m in sorted(set(sources[int(fid)])) if m in twin])
    return ids


def _move_cursor(source: SessionArchive, target: SessionArchive) -> int | None:
    """Move the target's ``facts_through`` over the copied messages the source had considered,
    up to the first target message that is not one (its own, or one the source had not reached
    yet)."""
    considered = derivation_state(source).through
    here = derivation_state(target).through
    seen = _considered_twins(source, target, considered)
    through = here
    while True:
        ids = [int(r[0]) for r in target.db.read(
            "SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 5000", (through,))]
        for mid in ids:
            if mid not in seen:
                return _set_through(target, here, through)
            through = mid
        if len(ids) < 5000:
            return _set_through(target, here, through)


def _considered_twins(source: SessionArchive, target: SessionArchive,
                      considered: int) -> set[int]:
    """Target ids of the messages whose twin (same session, same position) the source's
    derivation had considered (id at most ``considered``)."""
    sessions = [str(r[0]) for r in source.db.read("SELECT id FROM sessions ORDER BY id")]
    sql = ("SELECT s.id, m.id FROM messages AS m JOIN sessions AS s ON s.num = m.session "
           "WHERE s.id IN ({marks}) ORDER BY s.id, m.id")
    out: set[int] = set()
    for start in range(0, len(sessions), BATCH):
        batch = sessions[start:start + BATCH]
        out.update(int(theirs[1]) for mine, theirs in twins(
            source.read_in(sql, batch), target.read_in(sql, batch))
            if int(mine[1]) <= considered)
    return out


def _set_through(target: SessionArchive, before: int, through: int) -> int | None:
    if through <= before:
        return None
    table = vector_store(target).meta_table

    def tx(con: Any) -> None:
        # only if no derivation moved it meanwhile (a node deriving on the target)
        con.execute(f"INSERT INTO {table}(key, value) VALUES ('facts_through', ?) ON CONFLICT"
                    "(key) DO UPDATE SET value = excluded.value WHERE CAST("
                    f"{table}.value AS INTEGER) = ?", (str(through), before))

    target._write(tx)
    return through
