"""Derived memory's test helpers: the scripted model (only its words are fake) and the host."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import hermes_core.plugins.llm.anthropic as anthropic_plugin
import hermes_core.plugins.memory.session_archive as plugin
from hermes_core.config import parse_config_text
from hermes_core.host import PluginHost
from hermes_core.testing.messages_api import MessagesAPIServer, Reply
from hermes_core.types import Message, Session, SwitchReason, ToolContext

# ----------------------------------------------------------------------------- scripted model

TURN_LINE = re.compile(r"^\[(\d+)\] (user|assistant): (.*)$", re.M)
_FACT_LINE = re.compile(r"^\[fact (\d+)\] \(([^,]+),", re.M)


def prompt_of(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def scripted(body: dict[str, Any]) -> Reply:
    """The scripted model: facts for the sentences these tests say, citing the prompt's ids."""
    prompt = prompt_of(body)
    users = [(int(i), text) for i, role, text in TURN_LINE.findall(prompt) if role == "user"]
    current = {topic: int(i) for i, topic in _FACT_LINE.findall(prompt)}
    facts: list[dict[str, Any]] = []
    for mid, text in users:
        if "Porto" in text:
            facts.append({"kind": "state", "topic": "team location",
                          "text": "The user's team is based in Porto", "valid_from": None,
                          "sources": [mid]})
        if "Lisbon" in text:
            facts.append({"kind": "state", "topic": "team location",
                          "text": "The user moved the team to Lisbon", "valid_from": "2026-03-02",
                          "sources": [mid], "supersedes": [current["team location"]]
                          if "team location" in current else []})
        if "spicy" in text:
            facts.append({"kind": "preference", "topic": "food",
                          "text": "The user cannot eat spicy food", "valid_from": None,
                          "sources": [mid]})
    return Reply(text=json.dumps({"facts": facts}), usage={"input_tokens": len(prompt) // 4,
                                                           "output_tokens": 40})


# ----------------------------------------------------------------------------- the host


def config_text(api: MessagesAPIServer, storage_url: str | None = None, extra: str = "") -> str:
    """config.yaml for derived memory through the anthropic client at ``api``."""
    storage = f"storage:\n  url: {storage_url}\n" if storage_url else ""
    return (
        "memory:\n  providers: [session_archive]\n  scope: user\n"
        "embeddings:\n  embedder: none\n"
        f"llm:\n  api_key: k\n  model: claude-test\n  base_url: {api.base_url}\n"
        "  max_retries: 0\n"
        f"session_archive:\n  derive: true\n  derive_timeout: 20\n{extra}{storage}")


def make_host(home: Path, api: MessagesAPIServer, storage_url: str | None = None,
              extra: str = "") -> PluginHost:
    config = parse_config_text(config_text(api, storage_url, extra), home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("session_archive", plugin),
                                                       ("anthropic", anthropic_plugin)])
    host.activate_memory_providers()
    return host


def provider_of(host: PluginHost) -> Any:
    (provider,) = host.instances.values()
    return provider


def turn(host: PluginHost, session: Session, user: str, reply: str = "Noted.") -> None:
    host.hooks.on_message(message=Message("user", user), session=session)
    host.hooks.on_message(message=Message("assistant", reply), session=session)


def start(host: PluginHost, sid: str, user: str) -> Session:
    session = Session(id=sid, attributes={"user_id": user})
    host.hooks.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    return session


def settle(host: PluginHost, bound: float = 180.0) -> None:
    """Wait until the derivation lane has nothing queued or running (a deadline on its state:
    three test runs share two cores here, so the bound is generous)."""
    deriver = provider_of(host).deriver
    assert deriver.wait_idle(bound), (
        f"the derivation lane did not finish within {bound:.0f} s (queued: {deriver._queued}, "
        f"last error: {deriver.error})")


def search(host: PluginHost, query: str, user: str, sid: str = "elsewhere") -> dict[str, Any]:
    tool, _ = host.tools()["session_search"]
    session = Session(id=sid, attributes={"user_id": user})
    return json.loads(tool.invoke({"query": query}, ToolContext(session=session)))
