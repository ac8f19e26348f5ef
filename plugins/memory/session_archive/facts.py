"""Derived memory in the archive: the stored facts, their links, validity and the lane's state.

A fact is one atomic statement the auxiliary model read from a settled turn (see derive.py): a
preference stated in passing, a decision, a state that changes. Each row of ``facts`` (state.db
schema version 4, PostgreSQL migration 6) holds the statement, its ``kind`` and ``topic``, the
session it came from, that session's user key (memory.scope: user), ``valid_from`` (when it
became true: the model's date, else the time of its first message) and, once a newer fact
updates it, ``superseded_by`` / ``superseded_at``. ``fact_sources`` links it to the message ids
it was read from. Deleting any of those messages (``forget``, ``sessions delete``) deletes the
fact (a trigger), and deleting a fact makes the one it superseded current again.

The derivation's cursor and state are keys of the meta table (``meta``; ``archive_meta`` on
PostgreSQL): ``facts_through`` (the last turn-ending message considered), ``facts_error`` (the
last problem, with its time; removed by the next clean turn), and the model tokens spent
(``facts_input_tokens``, ``facts_output_tokens``) over ``facts_turns`` turns.

Everything takes a :class:`~.store.SessionArchive` and uses its read and write paths, so it runs
unchanged on both backends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hermes_core.storage.erasure_log import squash

from .schema import INDEXED_SQL
from .store import SessionArchive
from .vector_store import vector_store

__all__ = ["DerivationState", "Fact", "NewFact", "Turn", "derivation_state", "facts_of",
           "list_facts", "mentioning", "pending_turns", "read_state", "record_error", "save_turn",
           "turn_messages"]

#: characters of one message the model reads
MESSAGE_CHARS = 4000
_META_KEYS = ("facts_through", "facts_error", "facts_input_tokens", "facts_output_tokens",
              "facts_turns", "facts_skipped")
FACT_COLUMNS = ("f.id, f.kind, f.topic, f.text, f.valid_from, f.created_at, f.superseded_by, "
                "f.superseded_at, f.user_id, s.id, s.title")
#: a turn ends with an assistant message that calls no tool
_TURN_END = (f"m.role = 'assistant' AND m.tool_calls IS NULL AND length(m.content) > 0 "
             f"AND {INDEXED_SQL}")


@dataclass(slots=True)
class Turn:
    """A settled turn: its last (assistant) message, session and user."""

    end: int
    session_num: int
    session_id: str
    user_id: str | None
    #: (id, role, text, timestamp) of its user and assistant messages, in order
    messages: list[tuple[int, str, str, float]] = field(default_factory=list)


@dataclass(slots=True)
class NewFact:
    """A validated fact ready to store (derive.py makes them)."""

    kind: str
    topic: str
    text: str
    valid_from: float
    sources: list[int]
    supersedes: list[int] = field(default_factory=list)
    vec: bytes | None = None


@dataclass(slots=True)
class Fact:
    """A stored fact, as listings and searches show it."""

    id: int
    kind: str
    topic: str
    text: str
    valid_from: float
    created_at: float
    superseded_by: int | None
    superseded_at: float | None
    user_id: str | None
    session_id: str
    session_title: str | None
    sources: list[int] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return self.superseded_by is None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Fact:
        return cls(int(row[0]), str(row[1]), str(row[2]), str(row[3]), float(row[4]),
                   float(row[5]), None if row[6] is None else int(row[6]),
                   None if row[7] is None else float(row[7]), row[8], str(row[9]), row[10])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fact_id": self.id, "fact": self.text, "kind": self.kind, "topic": self.topic,
            "valid_from": _day(self.valid_from), "current": self.current,
            "session_id": self.session_id, "message_ids": self.sources}
        if self.session_title:
            out["session_title"] = self.session_title
        if self.superseded_by is not None:
            out["superseded_by"] = self.superseded_by
            out["superseded_at"] = _day(self.superseded_at)
        if self.user_id:
            out["user"] = self.user_id
        return out


def _day(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d")


@dataclass(slots=True)
class DerivationState:
    """Where the derivation stands (``doctor``, ``sessions facts --state``)."""

    through: int
    backlog: int
    facts: int
    current: int
    error: str | None
    turns: int
    skipped: int
    input_tokens: int
    output_tokens: int

    def tokens_per_turn(self) -> float | None:
        return (self.input_tokens + self.output_tokens) / self.turns if self.turns else None

    def to_dict(self) -> dict[str, Any]:
        return {"through": self.through, "backlog": self.backlog, "facts": self.facts,
                "current": self.current, "last_error": self.error, "turns": self.turns,
                "skipped": self.skipped, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "tokens_per_turn": self.tokens_per_turn()}


def _meta(archive: SessionArchive, con: Any = None) -> dict[str, str]:
    return vector_store(archive).meta(con, keys=_META_KEYS)


def _set(archive: SessionArchive, con: Any, key: str, value: str | None) -> None:
    vector_store(archive).set_meta(con, key, value)


def derivation_state(archive: SessionArchive) -> DerivationState:
    return read_state(archive.db.read, vector_store(archive).meta_table)


def read_state(read: Callable[..., list[Any]], meta_table: str = "meta") -> DerivationState:
    """The derivation's state through ``read(sql, params=())`` (the archive's reads, or a
    read-only connection's: ``doctor``)."""
    keys = ",".join(f"'{k}'" for k in _META_KEYS)
    meta = {str(k): str(v) for k, v in read(f"SELECT key, value FROM {meta_table} WHERE key IN "
                                             f"({keys})")}
    through = int(meta.get("facts_through") or 0)
    backlog = int(read(
        f"SELECT count(*) FROM messages AS m WHERE m.id > ? AND {_TURN_END}", (through,))[0][0])
    facts, current = read(
        "SELECT count(*), coalesce(sum(CASE WHEN superseded_by IS NULL THEN 1 ELSE 0 END), 0) "
        "FROM facts")[0]
    return DerivationState(through, backlog, int(facts), int(current), meta.get("facts_error"),
                           int(meta.get("facts_turns") or 0), int(meta.get("facts_skipped") or 0),
                           int(meta.get("facts_input_tokens") or 0),
                           int(meta.get("facts_output_tokens") or 0))


def pending_turns(archive: SessionArchive, limit: int = 8) -> tuple[int, list[Turn]]:
    """(the cursor, the next ``limit`` settled turns after it, with their messages)."""
    through = int(_meta(archive).get("facts_through") or 0)
    rows = archive.db.read(
        "SELECT m.id, s.num, s.id, s.user_id FROM messages AS m JOIN sessions AS s "
        f"ON s.num = m.session WHERE m.id > ? AND {_TURN_END} ORDER BY m.id LIMIT ?",
        (through, limit))
    turns = [Turn(int(r[0]), int(r[1]), str(r[2]), r[3]) for r in rows]
    for turn in turns:
        turn.messages = turn_messages(archive, turn.session_num, turn.end)
    return through, turns


def turn_messages(archive: SessionArchive, session_num: int,
                  end: int) -> list[tuple[int, str, str, float]]:
    """The user and assistant messages of the turn ending at message ``end``: from the last
    user message before it (or the previous turn's end) to it."""
    start = archive.db.read(
        "SELECT coalesce(max(m.id), 0) FROM messages AS m WHERE m.session = ? AND m.id < ? "
        "AND m.role = 'user'", (session_num, end))[0][0]
    rows = archive.db.read(
        f"SELECT m.id, m.role, substr(m.content, 1, {MESSAGE_CHARS}), m.timestamp "
        "FROM messages AS m WHERE m.session = ? AND m.id >= ? AND m.id <= ? "
        f"AND m.role IN ('user', 'assistant') AND length(m.content) > 0 AND {INDEXED_SQL} "
        "ORDER BY m.id", (session_num, int(start), end))
    return [(int(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]


def facts_of(archive: SessionArchive, user: str | None, *, current: bool = True,
             limit: int = 30) -> list[Fact]:
    """The newest ``limit`` facts of ``user`` (None: facts of sessions without a user key; the
    same rule as searches), only current ones with ``current``."""
    return list_facts(archive, user=user, current_only=current, limit=limit)


def list_facts(archive: SessionArchive, *, user: str | None = None, all_users: bool = False,
               current_only: bool = False, session_id: str | None = None,
               limit: int = 100) -> list[Fact]:
    """Stored facts, newest first: of one ``user`` (None with ``all_users``: everyone's), of one
    session, only current ones. The CLI (``sessions facts``) and library listing."""
    where, params = ["1 = 1"], []
    if not all_users:
        where.append("coalesce(f.user_id, '') = ?")
        params.append(user or "")
    if current_only:
        where.append("f.superseded_by IS NULL")
    if session_id is not None:
        where.append("s.id = ?")
        params.append(session_id)
    rows = archive.db.read(
        f"SELECT {FACT_COLUMNS} FROM facts AS f JOIN sessions AS s ON s.num = f.session "
        f"WHERE {' AND '.join(where)} ORDER BY f.id DESC LIMIT ?", (*params, limit))
    return _with_sources(archive, [Fact.from_row(r) for r in rows])


def _with_sources(archive: SessionArchive, facts: list[Fact]) -> list[Fact]:
    by_id = {f.id: f for f in facts}
    for fid, mid in archive.read_in("SELECT fact, message FROM fact_sources WHERE fact IN "
                                    "({marks}) ORDER BY message", list(by_id), chunk=500):
        by_id[int(fid)].sources.append(int(mid))
    return facts


def save_turn(archive: SessionArchive, turn: Turn, through: int, facts: list[NewFact], *,
              model: str | None, input_tokens: int, output_tokens: int,
              problem: str | None) -> bool:
    """Store one turn's facts, supersede what they update and move the cursor past the turn, in
    one transaction; False (nothing written) when another process moved the cursor meanwhile
    (it derived the turn) or the turn's messages are gone (forgotten while the model read them).
    """
    def tx(con: Any) -> bool:
        meta = _meta(archive, con)
        if int(meta.get("facts_through") or 0) != through:
            return False
        now = time.time()
        present = {int(r[0]) for r in con.execute(
            f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(turn.messages))})",
            tuple(m[0] for m in turn.messages)).fetchall()} if turn.messages else set()
        for fact in facts:
            if not set(fact.sources) <= present:
                continue  # a source was deleted meanwhile: what it said is forgotten
            cur = con.execute(
                "INSERT INTO facts(session, user_id, kind, topic, text, valid_from, created_at, "
                "model, vec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (turn.session_num, turn.user_id, fact.kind, fact.topic, fact.text,
                 fact.valid_from, now, model, fact.vec))
            fid = cur.lastrowid  # on PostgreSQL, from the RETURNING id pg_db.to_pg adds
            con.executemany("INSERT INTO fact_sources(fact, message) VALUES (?, ?)",
                            [(fid, mid) for mid in sorted(set(fact.sources))])
            for old in fact.supersedes:
                # only a current fact of the same user: a stale or foreign id changes nothing
                con.execute("UPDATE facts SET superseded_by = ?, superseded_at = ? WHERE id = ? "
                            "AND superseded_by IS NULL AND coalesce(user_id, '') = ? AND id <> ?",
                            (fid, fact.valid_from, old, turn.user_id or "", fid))
        _set(archive, con, "facts_through", str(turn.end))
        counts = {"facts_turns": 1, "facts_input_tokens": input_tokens,
                  "facts_output_tokens": output_tokens}
        if problem is not None:  # a turn with a problem and no fact to store is skipped
            counts["facts_skipped"] = 0 if facts else 1
        for key, add in counts.items():
            _set(archive, con, key, str(int(meta.get(key) or 0) + add))
        _set(archive, con, "facts_error", None if problem is None else
             _stamp(f"turn ending at message {turn.end}: {problem}"))
        return True

    return bool(archive._write(tx))


def _stamp(text: str) -> str:
    return f"{datetime.now(tz=UTC).strftime('%Y-%m-%d %H:%M:%S UTC')} {text[:600]}"


def record_error(archive: SessionArchive, problem: str) -> None:
    """Note a problem that stopped the derivation (the cursor stays: the turn is tried again)."""
    archive._write(lambda con: _set(archive, con, "facts_error", _stamp(problem)))


def mentioning(read: Callable[[str, tuple[Any, ...]], list[Any]], needle: str, scope_sql: str,
               params: tuple[Any, ...], messages: Sequence[int]) -> list[tuple[int, str, str]]:
    """(id, session id, text) of the facts a forget removes: those whose text or topic (shown
    beside it) mentions ``needle`` (squashed, casefolded) in scope, and those read from one of
    ``messages``. ``read(sql, params)`` runs a query (a transaction's connection, or the
    archive's reads)."""
    out: dict[int, tuple[int, str, str]] = {}
    for fid, sid, text, topic in read(
            "SELECT f.id, s.id, f.text, f.topic FROM facts AS f JOIN sessions AS s "
            "ON s.num = f.session WHERE 1 = 1" + scope_sql, params):
        if needle in squash(str(text)) or needle in squash(str(topic)):
            out[int(fid)] = (int(fid), str(sid), str(text))
    ids = list(messages)
    for k in range(0, len(ids), 500):
        part = ids[k:k + 500]
        for fid, sid, text in read(
                "SELECT f.id, s.id, f.text FROM facts AS f JOIN sessions AS s ON s.num = f.session "
                f"WHERE f.id IN (SELECT fact FROM fact_sources WHERE message IN "
                f"({','.join('?' * len(part))}))", tuple(part)):
            out[int(fid)] = (int(fid), str(sid), str(text))
    return sorted(out.values())
