"""What the served ``recall`` tool answers when the providers' ``prefetch`` gives nothing.

In the default config no provider recalls through ``prefetch``: the archive's prefetch is off
(``session_archive.prefetch``) and the file memory ranks entries by meaning only, with an
embedder. An agent does not miss it (the file memory is in its system prompt, and it calls
``session_search``), but an MCP client has neither, and an empty answer reads as "the memory is
broken". So ``recall`` then runs the stack's search tool for the query and fences its best hits
the way ``prefetch`` text is fenced; when that finds nothing too, the answer says so and why,
naming the settings that would change it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_core.prefetch import PrefetchResult

__all__ = ["SEARCH", "Hits", "nothing_recalled", "provider_name", "search_hits"]

#: the search tool recall falls back on
SEARCH = "session_search"
#: conversations and hits per conversation a fallback answer shows
SESSIONS = 3
HITS = 2
#: characters of a fallback answer at most (the archive's own prefetch default)
CHARS = 1500


@dataclass(frozen=True)
class Hits:
    """The fallback search's answer: ``text`` to fence, or ``why`` it is empty."""

    text: str = ""
    why: str = ""


def provider_name(plugin: str) -> str:
    """``memory-provider:session_archive`` -> ``session_archive``."""
    return plugin.rpartition(":")[2]


def search_hits(search: Callable[[dict[str, Any]], dict[str, Any]], query: str) -> Hits:
    """The best hits of ``search`` (the search tool, called with its arguments) for ``query``,
    as a few lines; when none, whether anything is archived at all (an empty query lists the
    recent conversations)."""
    found = search({"query": query, "limit": SESSIONS})
    lines = []
    for result in found.get("results") or []:
        hits = " | ".join(f'{h.get("role")}: {h.get("snippet")}'
                          for h in (result.get("hits") or [])[:HITS])
        if hits:
            title = f' "{result["title"]}"' if result.get("title") else ""
            lines.append(f'- {result.get("started_at") or ""}{title} (session '
                         f'{result.get("session_id")}): {hits}')
    if lines:
        text = ("Earlier conversations matching the query (call session_search with a "
                "session_id for more):")
        for line in lines:
            if len(text) + 1 + len(line) > CHARS:
                text += "\n" + line[: max(0, CHARS - len(text) - 2)] + "…"
                break
            text += "\n" + line
        return Hits(text=text)
    recent = search({"query": ""}).get("sessions") or []
    if not any(s.get("messages") for s in recent):
        return Hits(why="the archive holds no conversation yet (sessions of hermes-core chat, "
                        "serve or replay --in-place are archived; MCP tool calls are not)")
    return Hits(why=f"{SEARCH} found no archived message matching it")


def nothing_recalled(results: Sequence[PrefetchResult], *, searched: str | None) -> str:
    """One short paragraph: nothing was recalled, and why (each reason naming its setting)."""
    reasons = []
    failed = [f"{r.provider} failed ({r.error})" for r in results if r.status == "error"]
    quiet = [r.provider for r in results if r.status != "error"]
    if quiet:
        reasons.append(
            f"no provider's prefetch ({', '.join(quiet)}) recalled anything: in the default "
            "config the archive's prefetch is off (session_archive.prefetch: true turns it on) "
            "and the file memory recalls entries by meaning only, with an embedder "
            "(hermes-core doctor says whether one is active)")
    elif not failed:
        reasons.append("no active memory provider implements prefetch (memory.providers)")
    reasons += failed
    if searched is None:
        reasons.append(f"no {SEARCH} tool is served (add session_archive to memory.providers)")
    else:
        reasons.append(searched)
    return ("Nothing recalled for this query: " + "; ".join(reasons) + ". The curated memory "
            "itself is readable as the resources hermes://memory/MEMORY.md and "
            "hermes://memory/USER.md.")
