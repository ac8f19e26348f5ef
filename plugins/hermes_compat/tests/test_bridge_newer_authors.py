"""Turn authors, as newer Hermes hands them to memory providers: ``on_turn_start(...,
author_id=, author_name=, author_is_bot=)`` and ``sync_turn(..., turn_author={"id", "name",
"is_bot"})``, each only to a method naming them. In hermes-core a conversation with a user key
takes no other sender, so that key (and the platform's ``user_name``) is the author of each of
its turns; a conversation without one has no known author. A provider written for 0.19.0
(``**kwargs``) gets what 0.19.0 passed, nothing more. Driven by a platform's dispatcher over a
loopback model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
from conftest import drop_folder_plugin

from hermes_core import IncomingMessage
from hermes_core.config import parse_config_text
from hermes_core.dispatch import ConversationDispatcher
from hermes_core.replay import RecordingHost
from hermes_core.testing import MessagesAPIServer, Reply

PROVIDER = '''
import json
from pathlib import Path
from agent.memory_provider import MemoryProvider


class Logged(MemoryProvider):
    name = "{name}"

    def _log(self, event, **data):
        with open(Path(self.home) / "calls.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({{"event": event, **data}}) + "\\n")

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.home = kwargs["hermes_home"]

    def get_tool_schemas(self):
        return []

{methods}

def register(ctx):
    ctx.register_memory_provider(Logged())
'''

#: written for newer Hermes: names the author keywords
NEWER = '''
    def on_turn_start(self, turn_number, message, author_id=None, author_name=None,
                      author_is_bot=False):
        self._log("on_turn_start", text=message, author=[author_id, author_name, author_is_bot])

    def sync_turn(self, user_content, assistant_content, *, session_id="", turn_author=None):
        self._log("sync_turn", text=user_content, turn_author=turn_author)
'''

#: written for 0.19.0: takes whatever comes through **kwargs
OLDER = '''
    def on_turn_start(self, turn_number, message, **kwargs):
        self._log("on_turn_start", text=message, kwargs=sorted(kwargs))

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        self._log("sync_turn", text=user_content, kwargs=sorted(kwargs))
'''


def _calls(home: Path, plugin: str) -> list[dict[str, Any]]:
    files = sorted((home / "hermes-compat" / plugin).rglob("calls.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_turn_authors_reach_providers_written_for_them(core_home: Path) -> None:
    drop_folder_plugin(core_home, "newer", PROVIDER.format(name="newer", methods=NEWER))
    drop_folder_plugin(core_home, "older", PROVIDER.format(name="older", methods=OLDER))
    with MessagesAPIServer(default=Reply(text="ok")) as api:
        config = ("memory:\n  providers: [hermes-newer, hermes-older]\n"
                  f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  model: m\n"
                  "  max_retries: 0\n")
        host = RecordingHost.load(core_home, config=parse_config_text(
            config, core_home / "config.yaml"), entry_points=False, directories=False,
            plugins=[("hermes_compat", bridge)])
        dispatcher = ConversationDispatcher.open(host)
        try:
            for n in (1, 2):
                dispatcher.handle(IncomingMessage(
                    platform="webhook", conversation_key="ada-dm", text=f"ada says {n}",
                    user_id="u-ada", attributes={"user_name": "Ada"}))
                dispatcher.handle(IncomingMessage(platform="webhook", conversation_key="room",
                                                  text=f"someone says {n}"))
        finally:
            dispatcher.close()
            host.shutdown()

    newer = _calls(core_home, "newer")
    starts = {c["text"]: c["author"] for c in newer if c["event"] == "on_turn_start"}
    assert starts == {"ada says 1": ["u-ada", "Ada", False], "ada says 2": ["u-ada", "Ada", False],
                      "someone says 1": [None, None, False],
                      "someone says 2": [None, None, False]}
    syncs = {c["text"]: c["turn_author"] for c in newer if c["event"] == "sync_turn"}
    ada = {"id": "u-ada", "name": "Ada", "is_bot": False}
    assert syncs == {"ada says 1": ada, "ada says 2": ada,
                     "someone says 1": None, "someone says 2": None}

    older = _calls(core_home, "older")
    assert len([c for c in older if c["event"] == "on_turn_start"]) == 4
    assert len([c for c in older if c["event"] == "sync_turn"]) == 4
    # 0.19.0 called on_turn_start(turn_number, message) and sync_turn(..., session_id=,
    # messages=) (messages to a signature taking it, **kwargs included): no author
    assert all(c["kwargs"] == ([] if c["event"] == "on_turn_start" else ["messages"])
               for c in older), older
