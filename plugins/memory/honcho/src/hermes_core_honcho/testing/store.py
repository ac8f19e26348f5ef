"""The test server's data: workspaces, peers, sessions, messages, conclusions and cards in SQLite.

Everything is kept in one real SQLite file. Search is real ranking over what is stored: SQLite FTS5
with the ``porter unicode61`` tokenizer (English stemming, so "fixed" finds "fix") and bm25 scores,
queried as an OR of the query's words, so a plain-language question still finds its matches.

Two server-side LLM outputs of the real Honcho are replaced by deterministic, extractive stand-ins,
and they are the only faked behaviour of the server:

* the **dialectic** answer (``POST /peers/{observer}/chat``): the sentences of the stored
  conclusions and of the target peer's own messages that share the most words with the query;
* the **session summary** (``GET /sessions/{id}/context``): after ``summary_every`` messages, the
  first sentence of each user-side message, in order.

The real server also derives conclusions from messages with an LLM (its "deriver"); this store does
not: conclusions exist only when a client writes them, which is what the reference run of the real
server showed without an LLM behind it (see the README).
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import ID_RE

__all__ = ["ID_RE", "HonchoStore", "NotFound", "StoreError", "Unprocessable"]

_WORD_RE = re.compile(r"\w+", re.UNICODE)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do", "does", "for",
    "from", "had", "has", "have", "how", "i", "i'm", "if", "in", "into", "is", "it", "its", "me", "my",
    "no", "not", "of", "on", "or", "our", "so", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why",
    "will", "with", "would", "you", "your"
})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY, metadata TEXT NOT NULL, configuration TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS peers (
    workspace TEXT NOT NULL, id TEXT NOT NULL, metadata TEXT NOT NULL, configuration TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (workspace, id)
);
CREATE TABLE IF NOT EXISTS sessions (
    workspace TEXT NOT NULL, id TEXT NOT NULL, is_active INTEGER NOT NULL, metadata TEXT NOT NULL,
    configuration TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (workspace, id)
);
CREATE TABLE IF NOT EXISTS session_peers (
    workspace TEXT NOT NULL, session TEXT NOT NULL, peer TEXT NOT NULL,
    observe_me INTEGER, observe_others INTEGER, PRIMARY KEY (workspace, session, peer)
);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL, session TEXT NOT NULL,
    peer TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL, created_at TEXT NOT NULL,
    token_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages (workspace, session, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, content='messages', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TABLE IF NOT EXISTS conclusions (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL, observer TEXT NOT NULL,
    observed TEXT NOT NULL, session TEXT, content TEXT NOT NULL, level TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS conclusions_fts USING fts5(
    content, content='conclusions', content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS conclusions_ai AFTER INSERT ON conclusions BEGIN
    INSERT INTO conclusions_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER IF NOT EXISTS conclusions_ad AFTER DELETE ON conclusions BEGIN
    INSERT INTO conclusions_fts (conclusions_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;
CREATE TABLE IF NOT EXISTS cards (
    workspace TEXT NOT NULL, observer TEXT NOT NULL, target TEXT NOT NULL, card TEXT NOT NULL,
    PRIMARY KEY (workspace, observer, target)
);
"""


class StoreError(Exception):
    """A request the store refuses; ``status`` and ``detail`` become the HTTP answer."""

    status = 400

    def __init__(self, detail: Any) -> None:
        super().__init__(str(detail))
        self.detail = detail


class NotFound(StoreError):
    status = 404


class Unprocessable(StoreError):
    """FastAPI's validation status, with its ``[{loc, msg, type}]`` detail list."""

    status = 422

    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__([{"loc": loc, "msg": msg, "type": "value_error"}])


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_id() -> str:
    """A 21-character url-safe id, the shape of the real server's nanoids."""
    return secrets.token_urlsafe(16)[:21]


def check_id(value: Any, loc: list[str | int]) -> str:
    if not isinstance(value, str) or not ID_RE.match(value):
        raise Unprocessable(loc, "String should match pattern '^[a-zA-Z0-9_-]+$' (1-100 characters)")
    return value


def fts_query(text: str) -> str | None:
    """An FTS5 OR-query of the words of ``text`` (stopwords dropped when others remain)."""
    words = [w.lower() for w in _WORD_RE.findall(text)]
    kept = [w for w in words if w not in _STOPWORDS and len(w) > 1] or words
    unique = list(dict.fromkeys(kept))[:32]
    return " OR ".join(f'"{w}"' for w in unique) if unique else None


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text) if w.lower() not in _STOPWORDS and len(w) > 1}


def _stem(word: str) -> str:
    # A crude suffix strip, only for scoring sentences against the query (FTS5 already matched).
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


class HonchoStore:
    """Thread-safe access to the server's SQLite file (one connection behind a lock)."""

    def __init__(self, path: Path, *, summary_every: int = 20) -> None:
        self.path = path
        self.summary_every = summary_every
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a test server: speed over power-loss safety
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, args))

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        with self._lock:
            self._db.execute(sql, args)

    # ------------------------------------------------------------------ workspaces, peers, sessions

    def workspace(self, body: dict[str, Any]) -> dict[str, Any]:
        wid = check_id(body.get("id"), ["body", "id"])
        with self._lock:
            if self._one("SELECT 1 FROM workspaces WHERE id=?", (wid,)) is None:
                self._write("INSERT INTO workspaces VALUES (?,?,?,?)", (
                    wid, json.dumps(body.get("metadata") or {}),
                    json.dumps(body.get("configuration") or {}), now()))
            row = self._one("SELECT * FROM workspaces WHERE id=?", (wid,))
        assert row is not None
        return {"id": row["id"], "metadata": json.loads(row["metadata"]),
                "configuration": json.loads(row["configuration"]), "created_at": row["created_at"]}

    def require_workspace(self, wid: str) -> None:
        if self._one("SELECT 1 FROM workspaces WHERE id=?", (wid,)) is None:
            raise NotFound(f"Workspace {wid} not found")

    def peer(self, wid: str, body: dict[str, Any]) -> dict[str, Any]:
        self.require_workspace(wid)
        pid = check_id(body.get("id"), ["body", "id"])
        with self._lock:
            self._ensure_peer(wid, pid, body.get("metadata"), body.get("configuration"))
            row = self._one("SELECT * FROM peers WHERE workspace=? AND id=?", (wid, pid))
        assert row is not None
        return self._peer_json(row)

    def _ensure_peer(self, wid: str, pid: str, metadata: Any = None, configuration: Any = None) -> None:
        self._write("INSERT OR IGNORE INTO peers VALUES (?,?,?,?,?)", (
            wid, pid, json.dumps(metadata or {}), json.dumps(configuration or {}), now()))

    @staticmethod
    def _peer_json(row: sqlite3.Row) -> dict[str, Any]:
        return {"id": row["id"], "workspace_id": row["workspace"], "created_at": row["created_at"],
                "metadata": json.loads(row["metadata"]),
                "configuration": json.loads(row["configuration"])}

    def require_peer(self, wid: str, pid: str) -> None:
        self.require_workspace(wid)
        if self._one("SELECT 1 FROM peers WHERE workspace=? AND id=?", (wid, pid)) is None:
            raise NotFound(f"Peer {pid} not found in workspace {wid}")

    def session(self, wid: str, body: dict[str, Any]) -> dict[str, Any]:
        self.require_workspace(wid)
        sid = check_id(body.get("id"), ["body", "id"])
        peers = body.get("peers") or {}
        if not isinstance(peers, dict):
            raise Unprocessable(["body", "peers"], "Input should be a valid dictionary")
        with self._lock:
            self._write("INSERT OR IGNORE INTO sessions VALUES (?,?,?,?,?,?)", (
                wid, sid, 1, json.dumps(body.get("metadata") or {}),
                json.dumps(body.get("configuration") or {}), now()))
            self._add_peers(wid, sid, peers)
        return self.session_json(wid, sid)

    def session_json(self, wid: str, sid: str) -> dict[str, Any]:
        row = self._one("SELECT * FROM sessions WHERE workspace=? AND id=?", (wid, sid))
        if row is None:
            raise NotFound(f"Session {sid} not found in workspace {wid}")
        return {"id": row["id"], "is_active": bool(row["is_active"]), "workspace_id": row["workspace"],
                "metadata": json.loads(row["metadata"]),
                "configuration": json.loads(row["configuration"]), "created_at": row["created_at"]}

    def _add_peers(self, wid: str, sid: str, peers: dict[str, Any]) -> None:
        for pid, cfg in peers.items():
            check_id(pid, ["body", pid])
            cfg = cfg or {}
            if not isinstance(cfg, dict):
                raise Unprocessable(["body", pid], "Input should be a valid dictionary")
            self._ensure_peer(wid, pid)
            self._write("INSERT OR REPLACE INTO session_peers VALUES (?,?,?,?,?)", (
                wid, sid, pid, _flag(cfg.get("observe_me")), _flag(cfg.get("observe_others"))))

    def add_session_peers(self, wid: str, sid: str, body: dict[str, Any]) -> dict[str, Any]:
        self.session_json(wid, sid)
        with self._lock:
            self._add_peers(wid, sid, body)
        return self.session_json(wid, sid)

    def peer_config(self, wid: str, sid: str, pid: str) -> dict[str, Any]:
        self.session_json(wid, sid)
        row = self._one("SELECT * FROM session_peers WHERE workspace=? AND session=? AND peer=?",
                        (wid, sid, pid))
        if row is None:
            raise NotFound(f"Peer {pid} is not a member of session {sid}")
        return {"observe_me": _unflag(row["observe_me"]), "observe_others": _unflag(row["observe_others"])}

    # ------------------------------------------------------------------------------ messages

    def add_messages(self, wid: str, sid: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.session_json(wid, sid)
        out = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for item in items:
                    self._ensure_peer(wid, item["peer_id"])
                    self._write("INSERT OR IGNORE INTO session_peers VALUES (?,?,?,?,?)",
                                (wid, sid, item["peer_id"], None, None))
                    mid, created = new_id(), item.get("created_at") or now()
                    self._write(
                        "INSERT INTO messages (id, workspace, session, peer, content, metadata, "
                        "created_at, token_count) VALUES (?,?,?,?,?,?,?,?)",
                        (mid, wid, sid, item["peer_id"], item["content"],
                         json.dumps(item.get("metadata") or {}), created, _tokens(item["content"])))
                    out.append(mid)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return [self._message_json(r) for r in self._rows(
            f"SELECT * FROM messages WHERE id IN ({','.join('?' * len(out))}) ORDER BY seq", tuple(out))]

    @staticmethod
    def _message_json(row: sqlite3.Row) -> dict[str, Any]:
        return {"id": row["id"], "content": row["content"], "peer_id": row["peer"],
                "session_id": row["session"], "metadata": json.loads(row["metadata"]),
                "created_at": row["created_at"], "workspace_id": row["workspace"],
                "token_count": row["token_count"]}

    def messages(self, wid: str, sid: str | None = None) -> list[dict[str, Any]]:
        """Every stored message of a workspace (or one session), oldest first: for tests."""
        if sid is None:
            rows = self._rows("SELECT * FROM messages WHERE workspace=? ORDER BY seq", (wid,))
        else:
            rows = self._rows("SELECT * FROM messages WHERE workspace=? AND session=? ORDER BY seq",
                              (wid, sid))
        return [self._message_json(r) for r in rows]

    def search(self, wid: str, query: str, filters: dict[str, Any] | None, limit: int,
               *, author: str | None = None) -> list[dict[str, Any]]:
        """Messages ranked by bm25 over the query's words, filtered; the workspace must exist."""
        self.require_workspace(wid)
        match = fts_query(query)
        if match is None:
            return []
        where, args = ["m.workspace = ?"], [wid]
        if author is not None:
            where.append("m.peer = ?")
            args.append(author)
        for key, value in (filters or {}).items():
            if key == "peer_id":
                where.append("m.peer = ?")
            elif key == "session_id":
                where.append("m.session = ?")
            elif key == "peer_perspective":
                where.append("m.session IN (SELECT session FROM session_peers WHERE workspace = "
                             "m.workspace AND peer = ?)")
            else:
                raise Unprocessable(["body", "filters", key],
                                    "unsupported filter; this server knows peer_id, session_id and "
                                    "peer_perspective")
            args.append(str(value))
        rows = self._rows(
            "SELECT m.* FROM messages_fts f JOIN messages m ON m.seq = f.rowid WHERE messages_fts "
            f"MATCH ? AND {' AND '.join(where)} ORDER BY bm25(messages_fts) LIMIT ?",
            (match, *args, limit))
        return [self._message_json(r) for r in rows]

    # ---------------------------------------------------------------------------- conclusions

    def add_conclusions(self, wid: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.require_workspace(wid)
        for i, item in enumerate(items):  # all checked before any is stored
            for key in ("observer_id", "observed_id"):
                check_id(item.get(key), ["body", "conclusions", i, key])
                self.require_peer(wid, item[key])
        ids = []
        with self._lock:
            for item in items:
                cid = new_id()
                self._write(
                    "INSERT INTO conclusions (id, workspace, observer, observed, session, content, "
                    "level, created_at) VALUES (?,?,?,?,?,?,?,?)",
                    (cid, wid, item["observer_id"], item["observed_id"], item.get("session_id"),
                     item["content"], "explicit", now()))
                ids.append(cid)
        return [self._conclusion_json(r) for r in self._rows(
            f"SELECT * FROM conclusions WHERE id IN ({','.join('?' * len(ids))}) ORDER BY seq",
            tuple(ids))]

    @staticmethod
    def _conclusion_json(row: sqlite3.Row) -> dict[str, Any]:
        return {"id": row["id"], "content": row["content"], "observer_id": row["observer"],
                "observed_id": row["observed"], "session_id": row["session"], "level": row["level"],
                "created_at": row["created_at"]}

    def _conclusion_filter(self, filters: dict[str, Any] | None) -> tuple[list[str], list[Any]]:
        where, args = [], []
        columns = {"observer_id": "observer", "observed_id": "observed", "session_id": "session"}
        for key, value in (filters or {}).items():
            if key not in columns:
                raise Unprocessable(["body", "filters", key],
                                    "unsupported filter; use observer_id, observed_id or session_id")
            where.append(f"c.{columns[key]} = ?")
            args.append(value)
        return where, args

    def list_peers(self, wid: str, page: int, size: int) -> dict[str, Any]:
        self.require_workspace(wid)
        total_row = self._one("SELECT count(*) AS n FROM peers WHERE workspace = ?", (wid,))
        total = int(total_row["n"]) if total_row else 0
        rows = self._rows("SELECT * FROM peers WHERE workspace = ? ORDER BY created_at, id "
                          "LIMIT ? OFFSET ?", (wid, size, (page - 1) * size))
        return {"items": [self._peer_json(r) for r in rows], "total": total, "page": page,
                "size": size, "pages": (total + size - 1) // size}

    def list_conclusions(self, wid: str, filters: dict[str, Any] | None, page: int,
                         size: int) -> dict[str, Any]:
        self.require_workspace(wid)
        where, args = self._conclusion_filter(filters)
        clause = " AND ".join(["c.workspace = ?", *where])
        total_row = self._one(f"SELECT count(*) AS n FROM conclusions c WHERE {clause}", (wid, *args))
        total = int(total_row["n"]) if total_row else 0
        rows = self._rows(f"SELECT c.* FROM conclusions c WHERE {clause} ORDER BY c.seq DESC "
                          "LIMIT ? OFFSET ?", (wid, *args, size, (page - 1) * size))
        return {"items": [self._conclusion_json(r) for r in rows], "total": total, "page": page,
                "size": size, "pages": (total + size - 1) // size}

    def query_conclusions(self, wid: str, query: str, top_k: int,
                          filters: dict[str, Any] | None) -> list[dict[str, Any]]:
        self.require_workspace(wid)
        match = fts_query(query)
        if match is None:
            return []
        where, args = self._conclusion_filter(filters)
        clause = " AND ".join(["c.workspace = ?", *where])
        rows = self._rows(
            "SELECT c.* FROM conclusions_fts f JOIN conclusions c ON c.seq = f.rowid WHERE "
            f"conclusions_fts MATCH ? AND {clause} ORDER BY bm25(conclusions_fts) LIMIT ?",
            (match, wid, *args, top_k))
        return [self._conclusion_json(r) for r in rows]

    def delete_conclusion(self, wid: str, cid: str) -> None:
        self.require_workspace(wid)
        with self._lock:
            if self._one("SELECT 1 FROM conclusions WHERE workspace=? AND id=?", (wid, cid)) is None:
                raise NotFound(f"Conclusion {cid} not found")
            self._write("DELETE FROM conclusions WHERE workspace=? AND id=?", (wid, cid))

    # ------------------------------------------------------------------ representation and cards

    def representation(self, wid: str, observer: str, target: str | None, *,
                       search_query: str | None = None, top_k: int | None = None,
                       max_conclusions: int | None = None) -> str:
        """The observer's conclusions about the target as ``- text`` lines ("" when none)."""
        self.require_peer(wid, observer)
        subject = target or observer
        filters = {"observer_id": observer, "observed_id": subject}
        rows: list[dict[str, Any]] = []
        if search_query:
            rows = self.query_conclusions(wid, search_query, top_k or 10, filters)
        if not rows:  # no query, or nothing matched it: the most recent ones
            rows = self.list_conclusions(wid, filters, 1, max_conclusions or 25)["items"]
        return "\n".join(f"- {r['content']}" for r in rows)

    def card(self, wid: str, observer: str, target: str | None) -> list[str] | None:
        self.require_peer(wid, observer)
        row = self._one("SELECT card FROM cards WHERE workspace=? AND observer=? AND target=?",
                        (wid, observer, target or observer))
        return json.loads(row["card"]) if row else None

    def set_card(self, wid: str, observer: str, target: str | None, card: list[str]) -> list[str]:
        self.require_peer(wid, observer)
        if target:
            self.require_peer(wid, target)
        self._write("INSERT OR REPLACE INTO cards VALUES (?,?,?,?)",
                    (wid, observer, target or observer, json.dumps(card)))
        return card

    # ---------------------------------------------------------- the faked LLM outputs (extractive)

    def summary(self, wid: str, sid: str) -> dict[str, Any] | None:
        """The extractive stand-in for Honcho's LLM session summary (``None`` below the threshold)."""
        rows = self._rows("SELECT * FROM messages WHERE workspace=? AND session=? ORDER BY seq",
                          (wid, sid))
        if len(rows) < self.summary_every:
            return None
        firsts = [_SENTENCE_RE.split(r["content"].strip(), maxsplit=1)[0] for r in rows[::2]]
        content = "Conversation so far: " + " ".join(f for f in firsts if f)[:2000]
        return {"content": content, "message_id": rows[-1]["id"], "summary_type": "short",
                "created_at": rows[-1]["created_at"], "token_count": _tokens(content)}

    def dialectic(self, wid: str, observer: str, query: str, target: str | None,
                  session_id: str | None = None, limit: int = 3) -> str | None:
        """The extractive stand-in for the dialectic LLM: the best-matching stored sentences."""
        self.require_peer(wid, observer)
        subject = target or observer
        if target:
            self.require_peer(wid, target)
        filters = {"peer_id": subject, **({"session_id": session_id} if session_id else {})}
        texts = [c["content"] for c in self.query_conclusions(
            wid, query, 10, {"observer_id": observer, "observed_id": subject})]
        texts += [m["content"] for m in self.search(wid, query, filters, 10)]
        wanted = {_stem(t) for t in _terms(query)}
        scored: list[tuple[int, int, str]] = []
        for order, text in enumerate(texts):
            for sentence in _SENTENCE_RE.split(text):
                sentence = sentence.strip()
                hits = len(wanted & {_stem(t) for t in _terms(sentence)})
                if sentence and hits:
                    scored.append((-hits, order, sentence))
        picked: list[str] = []
        for _hits, _order, sentence in sorted(scored):
            if sentence not in picked:
                picked.append(sentence)
            if len(picked) == limit:
                break
        if not picked:
            return None
        return f"From what {subject} has shared: " + " ".join(picked)

    def context(self, wid: str, sid: str, *, tokens: int | None, peer_target: str | None,
                peer_perspective: str | None, search_query: str | None,
                summary: bool) -> dict[str, Any]:
        self.session_json(wid, sid)
        rows = self._rows("SELECT * FROM messages WHERE workspace=? AND session=? ORDER BY seq DESC",
                          (wid, sid))
        budget = tokens if tokens is not None else 100_000
        kept: list[dict[str, Any]] = []
        for row in rows:  # the most recent messages that fit the token budget, oldest first
            budget -= row["token_count"]
            if budget < 0:
                break
            kept.insert(0, self._message_json(row))
        out: dict[str, Any] = {"id": sid, "messages": kept,
                               "summary": self.summary(wid, sid) if summary else None,
                               "peer_representation": None, "peer_card": None}
        if peer_target:
            observer = peer_perspective or peer_target
            out["peer_representation"] = self.representation(
                wid, observer, peer_target, search_query=search_query) or None
            out["peer_card"] = self.card(wid, observer, peer_target)
        return out


def _flag(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def _unflag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)
