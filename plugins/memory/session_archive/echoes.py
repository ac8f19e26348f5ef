"""The search tools' echoes: messages that only repeat archived text or a query.

A ``session_search`` (or the lossless engine's ``context_search``) result repeats archived
messages, and a call of one repeats a query: indexed like conversation, they would be found by
the very words they repeat and crowd out what they point to. Both backends leave them out of
what a search shows, by the same rule: a message of an echo tool, or a message calling one with
at most :data:`ECHO_CONTENT` characters of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import Candidate
    from .store import SessionArchive

__all__ = ["ECHO_CHECK", "ECHO_CONTENT", "ECHO_NAMES", "ECHO_TOOLS", "calls_echo", "check_echoes"]

#: tools whose results only repeat archived messages, and whose calls repeat a query
ECHO_TOOLS = ("session_search", "context_search")
#: a message calling an echo tool with at most this much text of its own is a pure echo
ECHO_CONTENT = 300
#: how many of the best candidates are checked for echoes (the rest are never shown)
ECHO_CHECK = 300
#: the echo tools' names as an SQL list
ECHO_NAMES = ", ".join(f"'{t}'" for t in ECHO_TOOLS)


def calls_echo(calls: str) -> str:
    """The SQL condition that the tool calls (JSON text) in column ``calls`` call an echo tool."""
    return " OR ".join(f"{calls} LIKE '%\"name\":\"{t}\"%'" for t in ECHO_TOOLS)


def check_echoes(archive: SessionArchive, found: list[Candidate]) -> list[Candidate]:
    """``found`` without the echoes among its best :data:`ECHO_CHECK` (one query)."""
    head, tail = found[:ECHO_CHECK], found[ECHO_CHECK:]
    if not head:
        return found
    echoes = {r[0] for r in archive.db.read(
        f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(head))}) AND "
        f"(tool_name IN ({ECHO_NAMES}) OR (tool_calls IS NOT NULL AND "
        f"length(content) <= {ECHO_CONTENT} AND ({calls_echo('tool_calls')})))",
        tuple(c.id for c in head))}
    if not echoes:
        return found
    return [c for c in head if c.id not in echoes] + tail
