"""Derived memory in ``storage migrate``: the facts travel with the sessions they were read from.

The facts (facts.py) are what the auxiliary model read from settled turns, paid for in model
tokens; a migration that left them behind would lose them, or pay again to derive them on the
target. :func:`copy_facts` runs after the sessions are copied. Message ids change on the way, so
each source message is paired with the target message at the same position of the same session,
with the same role and text (as the vectors are, migrate.py); a fact is copied with its kind,
topic, text, validity, model and vector, linked to the paired messages, and what superseded it
is linked again once every fact is in. A fact none of whose source messages has a twin is not
copied (its evidence is not there). A session whose facts are already in the target (a second
run) is skipped.

The target's derivation cursor (``facts_through``) then moves over the copied messages the source
had already considered, as far as that holds for every message in between, so the target does
not ask the model again about turns whose facts were copied.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .facts import derivation_state
from .store import SessionArchive
from .vector_store import vector_store

__all__ = ["FactCopy", "copy_facts", "twins"]

#: sessions looked at per round trip
_SESSIONS = 200
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
    for start in range(0, len(sessions), _SESSIONS):
        batch = sessions[start:start + _SESSIONS]
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
            progress(min(start + _SESSIONS, len(sessions)), len(sessions))
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
    for start in range(0, len(sessions), _SESSIONS):
        batch = sessions[start:start + _SESSIONS]
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
