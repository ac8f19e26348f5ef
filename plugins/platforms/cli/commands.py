"""The slash commands of ``hermes-core chat``: each a function of the chat and its argument.

They print through the chat's ``say`` and never raise for the user's mistakes: a bad command is a
line of explanation and the conversation goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from hermes_core.types import ToolContext

if TYPE_CHECKING:
    from .repl import Chat

__all__ = ["COMMANDS", "HELP", "run_command"]


def _new(chat: Chat, arg: str) -> None:
    session = chat.with_agent(lambda agent: agent.new_session())
    chat.say(f"New session {session.id}. The previous one is kept in the archive.", style="info")


def _compress(chat: Chat, arg: str) -> None:
    focus = arg.strip() or None
    record = chat.with_agent(lambda agent: agent.compact(focus))
    if record is None:
        chat.say("Nothing to compact: the context engine left the history as it is.", style="info")
        return
    chat.say(f"Compacted {record.messages_before} -> {record.messages_after} messages "
             f"(~{record.tokens_before:,} -> ~{record.tokens_after:,} tokens); now in session "
             f"{record.new_session_id}.", style="info")
    for notice in record.notices:
        chat.say(f"  note: {notice}", style="warn")


def _memory(chat: Chat, arg: str) -> None:
    found = [tool for tool, _plugin in chat.host.tools().values()
             if tool.curation is not None and tool.curation.role == "memory"
             and tool.curation.snapshot is not None]
    if not found:
        chat.say("No active memory provider offers a memory tool that can list its entries "
                 "(memory.providers), so there are no notes to show.", style="warn")
        return
    for tool in found:
        assert tool.curation is not None and tool.curation.snapshot is not None
        chat.say(f"{tool.name}:", style="info")
        for line in tool.curation.snapshot().splitlines():
            chat.say(f"  {line}")


def _search(chat: Chat, arg: str) -> None:
    query = arg.strip()
    if not query:
        chat.say("Usage: /search WORDS  (searches your earlier sessions)", style="warn")
        return
    found = chat.host.tools().get("session_search")
    if found is None:
        chat.say("No session_search tool: is the session_archive provider active "
                 "(memory.providers)?", style="warn")
        return
    tool = found[0]
    session = chat.with_agent(lambda agent: agent.session)
    raw = tool.invoke({"query": query, "limit": chat.settings.search_limit},
                      ToolContext(session=session, plugin_name=found[1]))
    data = json.loads(raw)
    results = data.get("results") or []
    if not results:
        chat.say(data.get("note") or "No earlier session matches.", style="info")
        return
    for result in results:
        title = result.get("title") or "(untitled)"
        chat.say(f"{result.get('session_id')}  {title}  last active {result.get('last_active')}  "
                 f"{result.get('matches')} match(es)", style="info")
        for hit in result.get("hits", [])[:3]:
            snippet = " ".join(str(hit.get("snippet", "")).split())
            chat.say(f"  {hit.get('role')}: {snippet[:160]}")


def _plugins(chat: Chat, arg: str) -> None:
    for record in chat.host.records.values():
        state = "error" if record.error else ("enabled" if record.enabled else "disabled")
        kinds = ", ".join(record.kinds) or "-"
        chat.say(f"{record.name:<18} {state:<8} {record.source:<11} {kinds}",
                 style="warn" if record.error else None)
        if record.error:
            chat.say(f"  {record.error}", style="warn")
    active = ", ".join(sorted(chat.host.instances)) or "none"
    chat.say(f"active: {active}", style="dim")


def _quit(chat: Chat, arg: str) -> None:
    chat.running = False


def _help(chat: Chat, arg: str) -> None:
    for line in HELP:
        chat.say(line)


COMMANDS: dict[str, Callable[[Chat, str], None]] = {
    "/new": _new,
    "/compress": _compress,
    "/memory": _memory,
    "/search": _search,
    "/plugins": _plugins,
    "/quit": _quit,
    "/exit": _quit,
    "/help": _help,
}

HELP = (
    "/new               end this session and start a fresh one",
    "/compress [focus]  compact the conversation now, optionally keeping a topic in focus",
    "/memory            show MEMORY.md and USER.md",
    "/search WORDS      search earlier sessions",
    "/plugins           list plugins and what is active",
    "/quit              leave (Ctrl-D too)",
)


def run_command(chat: Chat, line: str) -> None:
    """Run one slash command line."""
    name, _, arg = line.strip().partition(" ")
    command = COMMANDS.get(name.lower())
    if command is None:
        chat.say(f"Unknown command {name!r}; /help lists the commands.", style="warn")
        return
    try:
        command(chat, arg)
    except Exception as exc:  # a failing command must not end the chat
        chat.say(f"{name} failed: {type(exc).__name__}: {exc}", style="error")
