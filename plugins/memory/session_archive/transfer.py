"""Export and import of sessions as JSON Lines.

One line per record: a ``session`` line, then that session's ``message`` lines, in order::

    {"type": "session", "format": "hermes-core-session/1", "id": "...", "title": ..., ...}
    {"type": "message", "session_id": "...", "role": "user", "content": "...", ...}

Import is resumable: each session is written in one transaction, a session whose id already exists
is skipped, and a malformed line stops the import with its line number before anything of that
session is written. Running the same import again after fixing the file finishes the job.

A session that exists but holds only the first messages of the imported one (it was copied
before its conversation went on: ``storage migrate`` while a node still wrote, an older export)
gets the messages it lacks, its end and counters; one whose messages differ is left alone.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hermes_core.types import Message, ToolCall
from hermes_core.users import USER_ATTRIBUTE, UserKeyError, check_user_key

from .errors import ImportFormatError
from .records import ROLES, encode_message
from .store import _INSERT_MESSAGE, SessionArchive

__all__ = ["FORMAT", "ImportReport", "export_lines", "export_session", "import_jsonl"]

FORMAT = "hermes-core-session/1"
_SESSION_FIELDS = (
    "platform", "model", "title", "started_at", "updated_at", "ended_at", "end_reason",
    "parent_session_id", "origin", "input_tokens", "output_tokens", "cache_read_tokens",
    "cache_write_tokens", "api_calls", "cost_usd", "attributes",
)
_COUNTERS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
             "api_calls", "cost_usd")


def export_lines(archive: SessionArchive, session_id: str) -> Iterator[str]:
    """The JSONL lines (without newlines) of one session."""
    record = archive.get_session(session_id).to_dict()
    head: dict[str, Any] = {"type": "session", "format": FORMAT, "id": record["id"]}
    head.update({k: record[k] for k in _SESSION_FIELDS})
    yield json.dumps(head, ensure_ascii=False)
    offset = 0
    while True:
        page = archive.messages(session_id, limit=1000, offset=offset)
        for m in page:
            yield json.dumps({
                "type": "message", "session_id": session_id, "role": m.role,
                "content": m.content, "tool_name": m.tool_name, "tool_call_id": m.tool_call_id,
                "tool_calls": m.tool_calls, "timestamp": m.timestamp, "meta": m.meta,
            }, ensure_ascii=False)
        if len(page) < 1000:
            break
        offset += 1000


def export_session(
    archive: SessionArchive, session_ids: list[str], out: IO[str]
) -> int:
    """Write the sessions as JSONL to ``out``; return the number of lines written."""
    n = 0
    for sid in session_ids:
        for line in export_lines(archive, sid):
            out.write(line + "\n")
            n += 1
    return n


@dataclass
class ImportReport:
    sessions_imported: int = 0
    sessions_skipped: int = 0
    messages_imported: int = 0
    skipped_ids: list[str] = field(default_factory=list)
    #: sessions already there that got the messages they lacked (counted in messages_imported)
    sessions_completed: int = 0
    #: storage migrate: the source was still being written after the last pass
    still_changing: bool = False


def _fail(path: Path, lineno: int, what: str, report: ImportReport) -> ImportFormatError:
    return ImportFormatError(
        f"{path}, line {lineno}: {what}. Nothing of that line's session was imported; "
        f"{report.sessions_imported} session(s) before it were. Fix the line and import the file "
        "again: sessions already imported are skipped"
    )


def _message(obj: dict[str, Any], where: Callable[[str], ImportFormatError]) -> Message:
    role = obj.get("role")
    if role not in ROLES:
        raise where(f"'role' must be one of {', '.join(ROLES)}, got {role!r}")
    content = obj.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise where(f"'content' must be a string, got {type(content).__name__}")
    calls_raw = obj.get("tool_calls") or []
    if not isinstance(calls_raw, list) or not all(isinstance(c, dict) for c in calls_raw):
        raise where("'tool_calls' must be a list of objects with id, name and arguments")
    calls = [ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""),
                      arguments=c.get("arguments", {})) for c in calls_raw]
    ts = obj.get("timestamp", 0.0)
    if not isinstance(ts, int | float):
        raise where(f"'timestamp' must be a number (seconds since 1970), got {ts!r}")
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise where("'meta' must be an object")
    return Message(role=role, content=content, tool_calls=calls,
                   tool_call_id=obj.get("tool_call_id"), tool_name=obj.get("tool_name"),
                   timestamp=float(ts), meta=meta)


def import_jsonl(
    archive: SessionArchive,
    path: str | Path,
    *,
    progress: Callable[[int], None] | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Import a JSONL file written by :func:`export_session` (or by hand in that format).

    ``progress`` is called with the number of bytes read after each line. With ``dry_run`` the
    file is read and checked in full but nothing is written: the report counts what would be.
    """
    path = Path(path)
    report = ImportReport()
    head: dict[str, Any] | None = None
    pending: list[Message] = []

    def flush() -> None:
        nonlocal head, pending
        if head is not None:
            if dry_run:
                _count_session(archive, head, pending, report)
            else:
                _write_session(archive, head, pending, report)
        head, pending = None, []

    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if progress is not None:
                progress(len(raw))
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8", "surrogateescape"))
            except ValueError as exc:
                raise _fail(path, lineno, f"not valid JSON ({exc})", report) from None
            except RecursionError:
                raise _fail(path, lineno, "its JSON is nested too deeply to read", report) from None
            if not isinstance(obj, dict) or obj.get("type") not in ("session", "message"):
                raise _fail(path, lineno, "expected an object with \"type\": \"session\" or "
                            "\"message\"", report)

            def where(what: str, _n: int = lineno) -> ImportFormatError:
                return _fail(path, _n, what, report)

            if obj["type"] == "session":
                flush()
                if not isinstance(obj.get("id"), str) or not obj["id"]:
                    raise where("a session line needs a non-empty string 'id'")
                if not isinstance(obj.get("started_at", 0), int | float):
                    raise where("'started_at' must be a number")
                problem = _attributes_problem(obj.get("attributes"))
                if problem is not None:
                    raise where(problem)
                head = obj
                continue
            if head is None:
                raise where("a message line comes before any session line")
            if obj.get("session_id", head["id"]) != head["id"]:
                raise where(f"message of session {obj.get('session_id')!r} inside session "
                            f"{head['id']!r}; each session's messages must follow its line")
            pending.append(_message(obj, where))
        flush()
    return report


def _attributes_problem(attributes: object) -> str | None:
    """Why a session line's ``attributes`` cannot be imported, or None.

    The user key names a folder and a database owner (memory.scope: user), so an imported one is
    held to the rule a live one is (hermes_core.users): a session must not be filed under a key
    no platform could have given it.
    """
    if attributes is None:
        return None
    if not isinstance(attributes, dict):
        return f"'attributes' must be an object, not {type(attributes).__name__}"
    if attributes.get(USER_ATTRIBUTE) is None:
        return None
    try:
        check_user_key(attributes[USER_ATTRIBUTE])
    except UserKeyError as exc:
        return f"attributes.{USER_ATTRIBUTE}: {exc}"
    return None


def _count_session(
    archive: SessionArchive, head: dict[str, Any], messages: list[Message], report: ImportReport
) -> None:
    """What :func:`_write_session` would do with a session new to the archive (a dry run)."""
    if archive.has_session(head["id"]):
        report.sessions_skipped += 1
        report.skipped_ids.append(head["id"])
        return
    report.sessions_imported += 1
    report.messages_imported += len(messages)


def _write_session(
    archive: SessionArchive, head: dict[str, Any], messages: list[Message], report: ImportReport
) -> None:
    sid = head["id"]
    rows = [encode_message(m)[0] for m in messages]

    def tx(con: sqlite3.Connection) -> int | None:
        known = archive._num(con, sid)
        if known is not None:
            return _complete(archive, con, known, head, rows)
        num = archive._create(
            con, sid, platform=str(head.get("platform") or "cli"), model=head.get("model"),
            title=head.get("title"), parent_session_id=head.get("parent_session_id"),
            origin=str(head.get("origin") or "new"), started_at=head.get("started_at"),
            attributes=head.get("attributes") or None,
        )
        # the title as exported, not as a compaction chain would number it
        _add(archive, con, num, head, rows, title=True)
        return -1

    written = archive._write(tx)
    if written == -1:
        report.sessions_imported += 1
        report.messages_imported += len(rows)
        return
    report.sessions_skipped += 1
    report.skipped_ids.append(sid)
    if written:
        report.sessions_completed += 1
        report.messages_imported += written


def _complete(archive: SessionArchive, con: Any, num: int, head: dict[str, Any],
              rows: list[tuple[Any, ...]]) -> int:
    """The messages of ``rows`` a stored session lacks, when it holds exactly their first ones
    (the same roles and texts): appended with the session's end and counters; how many."""
    have = con.execute("SELECT role, content FROM messages WHERE session = ? ORDER BY id",
                       (num,)).fetchall()
    if len(have) >= len(rows) or [tuple(h) for h in have] != [r[:2] for r in rows[:len(have)]]:
        return 0
    _add(archive, con, num, head, rows[len(have):])
    return len(rows) - len(have)


def _add(archive: SessionArchive, con: Any, num: int, head: dict[str, Any],
         rows: list[tuple[Any, ...]], *, title: bool = False) -> None:
    """``rows`` appended to session ``num``, with the session's end and counters (and with
    ``title``, its title) from ``head``; its last activity moved forward to the imported one's,
    never back."""
    con.executemany(_INSERT_MESSAGE, [(num, *r) for r in rows])
    assignments = ("ended_at = ?, end_reason = ?, input_tokens = ?, output_tokens = ?, "
                   "cache_read_tokens = ?, cache_write_tokens = ?, api_calls = ?, cost_usd = ?")
    values = [head.get("ended_at"), head.get("end_reason"), *(head.get(k) or 0 for k in _COUNTERS)]
    if title:
        assignments, values = f"title = ?, {assignments}", [head.get("title"), *values]
    con.execute(f"UPDATE sessions SET {assignments} WHERE num = ?", (*values, num))
    if head.get("updated_at") is not None:
        con.execute(f"UPDATE sessions SET updated_at = {archive.db.greatest('updated_at', '?')} "
                    "WHERE num = ?", (head["updated_at"], num))
