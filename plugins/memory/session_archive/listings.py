"""The session archive's listings: sessions by activity, a session's lineage and chain, and the
session a conversation resumes in. Read-only queries, the same on both backends (the SQL is
written in SQLite's spelling; :mod:`.pg_db` translates it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .db import Database
from .records import SessionRecord, StoredMessage

__all__ = ["LINEAGE_CTE", "LINEAGE_SQL", "Listings", "sessions_in_scope"]

#: The session nums of a session's whole lineage: its ancestors (parent_session_id chain up) and
#: its descendants (down), in one recursive query. UNION (not UNION ALL) makes a cycle harmless.
LINEAGE_CTE = """
WITH RECURSIVE
  up(id, parent) AS (
    SELECT id, parent_session_id FROM sessions WHERE id = :sid
    UNION SELECT s.id, s.parent_session_id FROM sessions AS s JOIN up ON s.id = up.parent),
  down(id) AS (
    SELECT :sid
    UNION SELECT s.id FROM sessions AS s JOIN down ON s.parent_session_id = down.id),
  lineage(num) AS (
    SELECT num FROM sessions WHERE id IN (SELECT id FROM up UNION SELECT id FROM down))
"""
LINEAGE_SQL = (LINEAGE_CTE + "SELECT s.num, s.id FROM lineage JOIN sessions AS s USING (num) "
               "ORDER BY s.started_at, s.num")  # ancestors first, on both backends


def sessions_in_scope(where: list[str], params: dict[str, Any], exclude_lineage_of: str | None,
                      user: str | None) -> str:
    """Add to ``where`` and ``params`` what keeps sessions ``s`` out of the lineage of
    ``exclude_lineage_of`` and (memory.scope: user) in ``user``'s; the statement's prefix."""
    if user is not None:
        where.append("coalesce(s.user_id, '') = :user")
        params["user"] = user
    if not exclude_lineage_of:
        return ""
    where.append("s.num NOT IN (SELECT num FROM lineage)")
    params["sid"] = exclude_lineage_of
    return LINEAGE_CTE


class Listings:
    """The listing half of :class:`~.store.SessionArchive` (``db``: its database; ``_nums``: the
    session id -> num cache)."""

    db: Database
    _nums: dict[str, int]

    def read_in(self, sql: str, values: Sequence[Any], params: Sequence[Any] = (), *,
                chunk: int = 900) -> list[Any]:
        """Every row of ``sql``, whose ``{marks}`` stands for ``values`` (``chunk`` at a time,
        under SQLite's limit on parameters) and whose other parameters ``params`` follow."""
        rows: list[Any] = []
        for start in range(0, len(values), chunk):
            part = list(values[start:start + chunk])
            rows += self.db.read(sql.format(marks=",".join("?" * len(part))), (*part, *params))
        return rows

    def lineage(self, session_id: str) -> list[str]:
        """The ids of the session's ancestors and descendants, itself included."""
        return [r[1] for r in self.db.read(LINEAGE_SQL, {"sid": session_id})]

    def list_sessions(
        self,
        *,
        limit: int = 20,
        offset: int = 0,
        chains: bool = True,
        exclude_lineage_of: str | None = None,
        user: str | None = None,
    ) -> list[SessionRecord]:
        """Sessions by last activity, newest first.

        With ``chains`` (the default) a compaction chain is one entry: its newest session, with
        the chain's first start, total messages, length and the preview of its first user message.
        ``user`` keeps the sessions of that user key only.
        """
        where = ["s.superseded = 0"] if chains else []
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        prefix = sessions_in_scope(where, params, exclude_lineage_of, user)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        order = "s.updated_at DESC" if chains else "s.started_at DESC"
        return self._with_chains(self.db.read(
            f"{prefix} SELECT {SessionRecord.COLUMNS}, s.chain FROM sessions AS s {clause} "
            f"ORDER BY {order}, s.num DESC LIMIT :limit OFFSET :offset", params))

    def session_ids(self, *, user: str | None = None, page: int = 1000) -> Iterator[str]:
        """Every session's id in the order they were created (a compaction's parent before its
        child), read a page at a time; ``user`` keeps that user key's sessions only."""
        last = 0
        where = " AND coalesce(user_id, '') = :user" if user is not None else ""
        while True:
            rows = self.db.read(f"SELECT num, id FROM sessions WHERE num > :last{where} "
                                "ORDER BY num LIMIT :page",
                                {"last": last, "user": user, "page": page})
            yield from (row[1] for row in rows)
            if len(rows) < page:
                return
            last = rows[-1][0]

    def _with_chains(self, rows: list[Any]) -> list[SessionRecord]:
        """The sessions of ``rows`` (:attr:`SessionRecord.COLUMNS`, then the chain), each with
        its compaction chain's figures (one query)."""
        records = [SessionRecord.from_row(r) for r in rows]
        chains = [r[-1] for r in rows]
        figures = {row[0]: row[1:] for row in self.read_in(
            "SELECT c.chain, count(*), sum(c.message_count), min(c.started_at), "
            "(SELECT id FROM sessions WHERE num = c.chain), "
            "(SELECT substr(m.content, 1, 160) FROM messages AS m WHERE m.session = c.chain"
            " AND m.role = 'user' ORDER BY m.id LIMIT 1) "
            "FROM sessions AS c WHERE c.chain IN ({marks}) GROUP BY c.chain", list(set(chains)))}
        for rec, chain in zip(records, chains, strict=True):
            length, total, started, root, preview = figures[chain]
            rec.chain_length, rec.chain_messages = length, total
            rec.chain_started_at, rec.chain_root, rec.preview = started, root, preview
        return records

    def chain_of(self, session_id: str) -> list[str]:
        """The ids of the session's compaction chain, oldest first."""
        return [r[0] for r in self.db.read(
            "SELECT c.id FROM sessions AS s JOIN sessions AS c ON c.chain = s.chain "
            "WHERE s.id = ? ORDER BY c.num", (session_id,))]

    def resumable(
        self, platform: str, conversation_key: str | None = None, session_id: str | None = None
    ) -> tuple[SessionRecord, list[StoredMessage]] | None:
        """The session a conversation resumes in, and its messages; ``None`` when there is none.

        Which session: ``session_id`` when given (any platform); else the newest session on
        ``platform`` whose ``attributes["conversation_key"]`` is ``conversation_key``; else, with
        no key, the session on ``platform`` used last. Then the newest session of its compaction
        chain, because a compaction's child holds the history the conversation goes on from.
        """
        params: tuple[Any, ...]
        if session_id is not None:
            chain, params = "SELECT chain FROM sessions WHERE id = ?", (session_id,)
        elif conversation_key is not None:
            key = self.db.json_text("attributes", "conversation_key")
            chain = (f"SELECT chain FROM sessions WHERE platform = ? AND {key} = ? "
                     "ORDER BY num DESC LIMIT 1")
            params = (platform, conversation_key)
        else:
            chain = ("SELECT chain FROM sessions WHERE platform = ? AND superseded = 0 "
                     "AND origin <> 'delegation' ORDER BY updated_at DESC, num DESC LIMIT 1")
            params = (platform,)
        # the newest session of that chain, then its messages: two reads (the record's chain
        # figures, which only listings show, are left at their defaults)
        found = self.db.read(
            f"SELECT {SessionRecord.COLUMNS}, s.num FROM sessions AS s WHERE s.chain = ({chain}) "
            "ORDER BY s.num DESC LIMIT 1", params)
        if not found:
            return None
        record, num = SessionRecord.from_row(found[0]), int(found[0][-1])
        self._nums.setdefault(record.id, num)  # read from the database: committed
        stored = self.db.read(
            f"SELECT {StoredMessage.COLUMNS} FROM messages AS m JOIN sessions AS s "
            "ON s.num = m.session WHERE m.session = ? ORDER BY m.id", (num,))
        return record, [StoredMessage.from_row(r) for r in stored]
