"""Reading a Hermes Agent ``state.db`` (read-only) into the archive export format.

Hermes keeps sessions and messages in SQLite (``sessions``, ``messages``; reference: its
``hermes_state.py``). Each session becomes one ``hermes-core-session/1`` session line and its
messages, in insertion order, so the session archive's own import path stores them (either
backend) and skips what it already holds. What is carried over:

* **lineage**: a session whose parent ended with ``end_reason = 'compression'`` (and is not a
  branch) is a compaction child (``origin: compression``), and joins its parent's chain; a branch
  (``model_config._branched_from``) keeps its parent as ``origin: branch``; other parents (a
  subagent's) stay as ``parent_session_id`` with ``origin: new``. Parents are written first.
* **messages**: active rows and rows a compaction archived in place (``compacted = 1``, marked
  ``meta.hermes.compacted``); rows the user rewound (``active = 0, compacted = 0``) are left out
  and counted. Structured content is reduced to its text; OpenAI-style tool calls become
  ``{id, name, arguments}``.

The database is opened read-only and never changed; a file that is not SQLite or not Hermes'
schema is refused naming the file and the fix, before anything is written.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from .home import HermesImportError

__all__ = ["FORMAT", "StateDbSummary", "convert", "count_messages"]

FORMAT = "hermes-core-session/1"
#: Hermes' marker for JSON-encoded (list/dict) message content
_JSON_PREFIX = "\x00json:"
_ROLES = ("system", "user", "assistant", "tool")
_NEEDED = {
    "sessions": {"id", "source", "parent_session_id", "started_at"},
    "messages": {"id", "session_id", "role", "content", "timestamp"},
}
#: the newest state.db schema version the import knows (Hermes Agent 0.19.0's)
_KNOWN_SCHEMA = 22
_FIX = ("check it with: sqlite3 state.db 'PRAGMA integrity_check', or import a backup copy of "
        "the Hermes home; nothing was imported")


@dataclass
class StateDbSummary:
    sessions: int = 0
    messages: int = 0
    #: rows left out, by reason
    left: dict[str, int] = field(default_factory=dict)

    def leave(self, reason: str, n: int = 1) -> None:
        self.left[reason] = self.left.get(reason, 0) + n


def _locked(path: Path, exc: sqlite3.DatabaseError) -> HermesImportError | None:
    """The error for a database another program holds locked (not a corrupt one), else None."""
    if getattr(exc, "sqlite_errorcode", None) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return None
    return HermesImportError(
        f"{path} is locked by another program ({exc}): Hermes Agent is probably running and "
        "writing it. Stop Hermes and run the import again, or import a copy of the Hermes home; "
        "nothing was imported")


def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise _locked(path, exc) or HermesImportError(
            f"{path} is not a readable SQLite database ({exc}): it may be corrupt or not a "
            f"state.db; {_FIX}") from None
    return con


def _check_schema(con: sqlite3.Connection, path: Path) -> set[str]:
    """The columns of ``messages``; :class:`HermesImportError` when this is not Hermes' schema."""
    columns: dict[str, set[str]] = {}
    try:
        for table in _NEEDED:
            columns[table] = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError as exc:
        raise _locked(path, exc) or HermesImportError(
            f"{path} cannot be read ({exc}); {_FIX}") from None
    for table, needed in _NEEDED.items():
        missing = needed - columns[table]
        version = _schema_version(con) if missing else None
        if version is not None and version > _KNOWN_SCHEMA:
            raise HermesImportError(
                f"{path} was written by a newer Hermes Agent (state.db schema version {version}; "
                f"this import reads Hermes' schema up to version {_KNOWN_SCHEMA}): its table "
                f"{table!r} lacks the columns {', '.join(sorted(missing))}. Upgrade the bridge "
                "(pip install -U hermes-core-hermes-compat) and run the import again; nothing "
                "was imported")
        if missing:
            what = "has no table" if not columns[table] else "has a table"
            raise HermesImportError(
                f"{path} is not a Hermes Agent state.db: it {what} {table!r}"
                + (f" with the columns {', '.join(sorted(missing))}" if columns[table] else "")
                + ". Point the import at a Hermes home (the folder Hermes Agent keeps state.db, "
                "memories/ and skills/ in, ~/.hermes by default); nothing was imported")
    return columns["messages"]


def _schema_version(con: sqlite3.Connection) -> int | None:
    """Hermes' own number for its state.db schema (``schema_version``), or None."""
    try:
        row = con.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
        return int(row[0]) if row is not None else None
    except (sqlite3.DatabaseError, TypeError, ValueError):
        return None


def count_messages(path: Path) -> int:
    """How many message rows the database holds (for the progress bar)."""
    con = _connect(path)
    try:
        _check_schema(con, path)
        return int(con.execute("SELECT count(*) FROM messages").fetchone()[0])
    finally:
        con.close()


class _BadTime(ValueError):
    """A time in state.db that is neither seconds nor an ISO 8601 date (the message names it)."""


def _seconds(value: Any, where: str) -> float | None:
    """A time of state.db as seconds since the epoch: Hermes writes numbers; SQLite keeps any
    value in a REAL column, so an ISO 8601 text (another tool's) is read as the time it is."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise _BadTime(f"{where} has the time {value!r}, neither seconds since 1970 nor an ISO "
                       "8601 date") from None


def _ordered_sessions(con: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every session, parents before their children, otherwise by start time."""
    rows = [dict(r) for r in con.execute("SELECT * FROM sessions ORDER BY started_at, id")]
    by_id = {r["id"]: r for r in rows}
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for row in rows:
        path: list[dict[str, Any]] = []
        cur: dict[str, Any] | None = row
        while cur is not None and cur["id"] not in placed and cur not in path:
            path.append(cur)
            parent = cur["parent_session_id"]
            cur = by_id.get(parent) if parent else None
        for item in reversed(path):
            placed.add(item["id"])
            out.append(item)
    return out


def _branched(row: dict[str, Any]) -> bool:
    raw = row.get("model_config")
    if not raw:
        return False
    try:
        cfg = json.loads(raw)
    except (TypeError, ValueError):
        return False
    return isinstance(cfg, dict) and cfg.get("_branched_from") is not None


def _session_line(row: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> dict[str, Any]:
    parent_id = row["parent_session_id"] or None
    parent = by_id.get(parent_id) if parent_id else None
    if parent_id is None:
        origin = "new"
    elif _branched(row):
        origin = "branch"
    elif parent is not None and parent.get("end_reason") == "compression":
        origin = "compression"
    else:
        origin = "new"
    attributes: dict[str, Any] = {"imported_from": "hermes", "hermes_source": row["source"]}
    for key in ("user_id", "chat_id", "cwd", "git_branch", "profile_name"):
        value = row.get(key)
        if value not in (None, ""):
            attributes[f"hermes_{key}"] = value
    cost = row.get("actual_cost_usd")
    if cost is None:
        cost = row.get("estimated_cost_usd")
    return {
        "type": "session", "format": FORMAT, "id": row["id"],
        "platform": str(row["source"] or "cli"), "model": row.get("model"),
        "title": row.get("title"),
        "started_at": _seconds(row["started_at"], f"session {row['id']!r} (started_at)"),
        "ended_at": _seconds(row.get("ended_at"), f"session {row['id']!r} (ended_at)"),
        "end_reason": row.get("end_reason"),
        "parent_session_id": parent_id, "origin": origin,
        "input_tokens": row.get("input_tokens") or 0,
        "output_tokens": row.get("output_tokens") or 0,
        "cache_read_tokens": row.get("cache_read_tokens") or 0,
        "cache_write_tokens": row.get("cache_write_tokens") or 0,
        "api_calls": row.get("api_call_count") or 0, "cost_usd": cost or 0,
        "attributes": attributes,
    }


def _text(content: Any) -> str:
    """A message's text: Hermes stores list/dict content as JSON behind a marker."""
    if content is None:
        return ""
    if isinstance(content, bytes):
        return content.decode("utf-8", "replace")
    if not isinstance(content, str):
        return str(content)
    if not content.startswith(_JSON_PREFIX):
        return content
    try:
        value = json.loads(content[len(_JSON_PREFIX):])
    except ValueError:
        return content[len(_JSON_PREFIX):]
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return json.dumps(value, ensure_ascii=False)


def _tool_calls(raw: Any) -> list[dict[str, Any]]:
    if not raw:
        return []
    try:
        calls = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    out: list[dict[str, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        nested = call.get("function")
        fn: dict[str, Any] = nested if isinstance(nested, dict) else call
        args: Any = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_raw": args}
        out.append({"id": str(call.get("id") or ""), "name": str(fn.get("name") or ""),
                    "arguments": args if isinstance(args, dict) else {"_value": args}})
    return out


def _message_line(row: sqlite3.Row, has: set[str]) -> dict[str, Any]:
    hermes: dict[str, Any] = {"id": row["id"]}
    if "compacted" in has and row["compacted"]:
        hermes["compacted"] = True
    for key in ("finish_reason", "reasoning"):
        if key in has and row[key]:
            hermes[key] = row[key]
    return {
        "type": "message", "session_id": row["session_id"], "role": row["role"],
        "content": _text(row["content"]),
        "tool_name": row["tool_name"] if "tool_name" in has else None,
        "tool_call_id": row["tool_call_id"] if "tool_call_id" in has else None,
        "tool_calls": _tool_calls(row["tool_calls"]) if "tool_calls" in has else [],
        "timestamp": _seconds(row["timestamp"], f"message {row['id']} of session "
                              f"{row['session_id']!r}") or 0.0,
        "meta": {"hermes": hermes},
    }


def _lines(con: sqlite3.Connection, has: set[str], summary: StateDbSummary,
           progress: Callable[[int], None]) -> Iterator[dict[str, Any]]:
    sessions = _ordered_sessions(con)
    by_id = {r["id"]: r for r in sessions}
    rewound = ("active" in has and "compacted" in has)
    for row in sessions:
        if row["id"] is None or str(row["id"]).strip() == "":
            summary.leave("sessions without an id")  # (another tool's row: Hermes sets one)
            continue
        summary.sessions += 1
        yield _session_line(row, by_id)
        for msg in con.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id",
                               (row["id"],)):
            progress(1)
            if rewound and not msg["active"] and not msg["compacted"]:
                summary.leave("messages rewound (undone) in Hermes")
                continue
            if msg["role"] not in _ROLES:
                summary.leave(f"messages with the role {msg['role']!r}")
                continue
            summary.messages += 1
            yield _message_line(msg, has)
    orphans = con.execute("SELECT count(*) FROM messages WHERE session_id NOT IN "
                          "(SELECT id FROM sessions)").fetchone()[0]
    if orphans:
        progress(int(orphans))
        summary.leave("messages of no session", int(orphans))


def _as_text(value: Any) -> str:
    """A value JSON has no form for as text: a blob where Hermes writes text (another tool's)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def convert(path: Path, out: IO[str], *, progress: Callable[[int], None] = lambda n: None
            ) -> StateDbSummary:
    """Write ``path``'s sessions and messages to ``out`` in the export format; read-only."""
    con = _connect(path)
    summary = StateDbSummary()
    try:
        has = _check_schema(con, path)
        for line in _lines(con, has, summary, progress):
            out.write(json.dumps(line, ensure_ascii=False, default=_as_text) + "\n")
    except sqlite3.DatabaseError as exc:
        raise _locked(path, exc) or HermesImportError(
            f"{path} could not be read to the end ({exc}); {_FIX}") from None
    except _BadTime as exc:
        raise HermesImportError(f"{path}: {exc}. Correct that row (sqlite3 state.db), or import "
                                "a backup copy of the Hermes home; nothing was imported") from None
    finally:
        con.close()
    return summary
