"""Helpers for the dispatcher and platform tests.

Everything is real except the model's words: a real PluginHost with the built-in session archive
writing a real state.db, the real anthropic SDK (AnthropicLLM) talking to the loopback Messages API
server (hermes_core.testing.MessagesAPIServer), whose replies are computed by ``echo_responder``.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from hermes_core.host import PluginHost
from hermes_core.testing import MessagesAPIServer, Reply, make_host

__all__ = [
    "EchoModel",
    "archived",
    "host_for",
    "platform_config",
    "user_texts",
]


def platform_config(api: MessagesAPIServer | None, extra: str = "",
                    providers: str = "session_archive", llm_extra: str = "") -> str:
    """config.yaml text: the session archive (by default only), the compressor, the loopback API."""
    llm = (f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
           f"  max_retries: 0\n  timeout: 20\n{llm_extra}") if api is not None else ""
    return f"memory:\n  providers: [{providers}]\ncontext:\n  engine: compressor\n{llm}{extra}"


def host_for(home: Path, api: MessagesAPIServer | None, extra: str = "",
             providers: str = "session_archive", llm_extra: str = "") -> PluginHost:
    """A host over ``home``: built-ins only (no entry points, no directory plugins)."""
    return make_host(home, config=platform_config(api, extra, providers, llm_extra))


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


def user_texts(body: dict[str, Any]) -> list[str]:
    """The user text blocks of one Messages API request body, in order (two user messages in a
    row arrive merged into one API turn of two blocks)."""
    return [t for m in body["messages"] if m["role"] == "user" for t in _texts(m["content"])]


class EchoModel:
    """A Messages API responder whose reply names the last user message and the number of user
    messages it saw ("re: hi (3)"), so tests can tell what the model was shown.

    It also tracks how many requests it is answering at once, per conversation (the text after
    ``conv=`` in the first user message) and in total, to show what ran in parallel.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.calls = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        texts = user_texts(body)
        with self.lock:
            self.calls += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                threading.Event().wait(self.delay)
            return Reply(text=f"re: {texts[-1]} ({len(texts)})", chunk_size=4)
        finally:
            with self.lock:
                self.active -= 1


def archived(home: Path) -> list[tuple[str, str, str | None, str]]:
    """Every stored message as (session id, role, conversation key, content), in storage order."""
    db = home / "state.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT s.id, m.role, json_extract(s.attributes, '$.conversation_key'), m.content "
            "FROM messages AS m JOIN sessions AS s ON s.num = m.session ORDER BY m.id"
        ).fetchall()
    finally:
        con.close()
