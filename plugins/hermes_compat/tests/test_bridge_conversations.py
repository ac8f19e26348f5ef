"""Several conversations at once (a platform's dispatcher): as in Hermes, whose gateway keeps an
agent, and so a provider object, per conversation, each conversation has a Hermes object of its
own, initialised once and never moved to another conversation's session."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
import hermes_style
from conftest import drop_folder_plugin

from hermes_core import IncomingMessage
from hermes_core.config import parse_config_text
from hermes_core.dispatch import ConversationDispatcher
from hermes_core.replay import RecordingHost
from hermes_core.testing import MessagesAPIServer, Reply

#: the recorder, also logging which object answers and the session it is initialised for
TRACING = (hermes_style.RECORDER
           .replace('            f.write(json.dumps({"event": event, **data}) + "\\n")',
                    '            f.write(json.dumps({"event": event, "obj": id(self), '
                    '"bound": self.session, **data}) + "\\n")')
           .replace('    def prefetch(self, query, *, session_id=""):\n',
                    '    def prefetch(self, query, *, session_id=""):\n'
                    '        self._log("prefetch", session_id=session_id)\n'))


def _calls(home: Path) -> list[dict[str, Any]]:
    files = sorted((home / "hermes-compat" / "recorder").rglob("calls.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _dispatch(core_home: Path, turns: list[str], **kw: Any) -> None:
    with MessagesAPIServer(default=Reply(text="ok")) as api:
        config = ("memory:\n  providers: [session_archive, hermes-recorder]\n"
                  "context:\n  engine: compressor\n"
                  f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  model: m\n"
                  "  max_retries: 0\n")
        host = RecordingHost.load(core_home, config=parse_config_text(
            config, core_home / "config.yaml"), entry_points=False, directories=False,
            plugins=[("hermes_compat", bridge)])
        dispatcher = ConversationDispatcher.open(host, **kw)
        try:
            for key in turns:
                dispatcher.handle(IncomingMessage(platform="webhook", conversation_key=key,
                                                  text=f"hello from {key}",
                                                  attributes={"chat_type": "dm"}))
        finally:
            dispatcher.close()
            host.shutdown()


def test_each_conversation_has_its_own_object(core_home: Path) -> None:
    assert TRACING.count('"obj"') == 1 and TRACING.count('"prefetch"') == 1
    drop_folder_plugin(core_home, "recorder", TRACING)
    _dispatch(core_home, ["alice", "bob"] * 3)
    calls = _calls(core_home)
    by_obj: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        by_obj[call["obj"]].append(call)
    assert len(by_obj) == 2
    for events in by_obj.values():
        # initialised once, for its own conversation's session, never moved
        assert [e["event"] for e in events if e["event"] == "initialize"] == ["initialize"]
        session = events[0]["session_id"]
        assert all(e["bound"] == session for e in events[1:])
        assert all(e.get("session_id", session) == session for e in events)
        assert [e["event"] for e in events].count("sync_turn") == 3
        # the conversation's end, then its object is shut down
        assert [e["event"] for e in events][-2:] == ["on_session_end", "shutdown"]
    assert len({events[0]["session_id"] for events in by_obj.values()}) == 2
    # what Hermes' gateway passes: its per-chat key and the chat's identity; no model, and no
    # parent (a primary session's)
    keys = {}
    for events in by_obj.values():
        kwargs = events[0]["kwargs"]
        assert kwargs["chat_type"] == "dm" and kwargs["platform"] == "webhook"
        assert "model" not in kwargs and "parent_session_id" not in kwargs
        keys[kwargs["gateway_session_key"]] = events[0]["session_id"]
    assert set(keys) == {"webhook:alice", "webhook:bob"}


def test_an_evicted_conversation_gets_a_new_object_that_resumes_its_session(
        core_home: Path) -> None:
    """With one agent live at a time, bob's turn evicts alice's agent (its session ends,
    ``expired``): her object gets the end and is shut down, as Hermes' gateway does with an
    evicted agent's providers; her next turn resumes her stored session in a new object."""
    drop_folder_plugin(core_home, "recorder", TRACING)
    _dispatch(core_home, ["alice", "bob", "alice"], max_agents=1)
    calls = _calls(core_home)
    inits = [c for c in calls if c["event"] == "initialize"]
    assert len(inits) == 3 and len({c["obj"] for c in inits}) == 3
    alice, bob, alice_again = inits
    assert alice_again["session_id"] == alice["session_id"] != bob["session_id"]
    first = [c["event"] for c in calls if c["obj"] == alice["obj"]]
    assert first[-2:] == ["on_session_end", "shutdown"]
    assert first.count("sync_turn") == 1
