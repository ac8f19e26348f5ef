"""Reading a conversation history from a JSONL file.

Two forms are accepted, line by line:

* a **message** object: ``{"role": ..., "content": ..., "tool_calls": [...], "tool_call_id": ...,
  "tool_name": ...}``. Tool calls may be hermes-style (``{"id", "name", "arguments": {...}}``) or
  OpenAI-style (``{"id", "function": {"name", "arguments": "<json>"}}``); ``content`` may be a
  string or a list of content blocks (their text is kept);
* the lines of a **replay transcript** (``hermes-core replay``, the files in ``examples/``): an
  optional ``{"meta": {...}}`` first line, kept as :attr:`HistoryFile.meta`, and
  ``{"event": "new_session"}`` lines, each of which ends a session: the history is that of the
  last session, as an agent replaying the file would hold it at the end.

Blank lines are skipped. Anything else is a :class:`HistoryFormatError` naming the file, the line
and what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import HermesCoreError
from .types import Message, ToolCall

__all__ = ["HistoryFile", "HistoryFormatError", "message_from_dict", "read_history", "read_text"]

_ROLES = ("system", "user", "assistant", "tool")


class HistoryFormatError(HermesCoreError):
    """A history file (or one message of it) is not in a form this module reads."""


@dataclass(slots=True)
class HistoryFile:
    """What :func:`read_history` found in a file."""

    #: the messages of the file's last session
    messages: list[Message]
    #: the ``meta`` line of a replay transcript, else empty
    meta: dict[str, Any] = field(default_factory=dict)
    #: sessions that ended (``new_session`` events) before the last one
    earlier_sessions: int = 0


def _tool_call(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, dict):
        raise HistoryFormatError(f"{where}: a tool call must be an object, got {type(raw).__name__}")
    function = raw.get("function")
    name = raw.get("name") or (function.get("name") if isinstance(function, dict) else None)
    args: Any = raw.get("arguments", raw.get("input"))
    if args is None and isinstance(function, dict):
        args = function.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {"raw": args}
    if not isinstance(name, str) or not name:
        raise HistoryFormatError(f"{where}: a tool call needs a 'name' (or 'function.name')")
    return ToolCall(id=str(raw.get("id") or ""), name=name,
                    arguments=args if isinstance(args, dict) else {})


def message_from_dict(raw: Any, where: str = "message") -> Message:
    """A :class:`Message` from its JSON form; errors name ``where`` and the bad field."""
    if not isinstance(raw, dict):
        raise HistoryFormatError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    role = raw.get("role")
    if role not in _ROLES:
        raise HistoryFormatError(f"{where}: 'role' must be one of {', '.join(_ROLES)}, got {role!r}")
    content = raw.get("content", "")
    if isinstance(content, list):  # content blocks: keep their text
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise HistoryFormatError(f"{where}: 'content' must be a string, got {type(content).__name__}")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise HistoryFormatError(f"{where}: 'tool_calls' must be a list")
    timestamp = raw.get("timestamp")
    meta = raw.get("meta")
    tool_call_id = raw.get("tool_call_id")
    tool_name = raw.get("tool_name") or raw.get("name")
    return Message(
        role=role,
        content=content,
        tool_calls=[_tool_call(c, f"{where}, tool call {i}") for i, c in enumerate(calls)],
        tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        tool_name=str(tool_name) if tool_name is not None else None,
        timestamp=float(timestamp) if isinstance(timestamp, (int, float)) else 0.0,
        meta=dict(meta) if isinstance(meta, dict) else {},
    )


def read_text(path: Path, error: Callable[[str], Exception], missing: str) -> str:
    """The UTF-8 text of ``path``, else ``error`` of a message naming the file and the problem
    (``missing`` says what to give instead of a file that does not exist)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file; {missing}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read it: {exc}") from None


def read_history(path: Path) -> HistoryFile:
    """The history in ``path`` (see the module docstring for the accepted lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryFormatError(f"{path}: cannot read the file: {exc}") from None
    out = HistoryFile([])
    seen_any = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise HistoryFormatError(
                f"{where}: not valid JSON ({exc}); each line must be one message object like "
                '{"role": "user", "content": "..."}'
            ) from None
        if isinstance(raw, dict) and "meta" in raw and "role" not in raw:
            if seen_any or not isinstance(raw["meta"], dict):
                raise HistoryFormatError(
                    f'{where}: a {{"meta": {{...}}}} line may only be the first line')
            out.meta = dict(raw["meta"])
        elif isinstance(raw, dict) and "event" in raw and "role" not in raw:
            if raw.get("event") != "new_session":
                raise HistoryFormatError(
                    f"{where}: unknown event {raw.get('event')!r}; the only event is "
                    '{"event": "new_session"}')
            out.earlier_sessions += 1
            out.messages = []
        else:
            out.messages.append(message_from_dict(raw, where))
        seen_any = True
    return out
