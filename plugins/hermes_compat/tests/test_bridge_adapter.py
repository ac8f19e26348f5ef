"""The adapter, driven through real replays with small Hermes-style plugins (tests/hermes_style.py)
dropped into the home's hermes-plugins/ folder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
import hermes_style
import pytest
from conftest import drop_folder_plugin, listing, recall_in_prompt, run

from hermes_core.config import parse_config_text
from hermes_core.replay import RecordingHost
from hermes_core.types import Message, Session, SwitchReason

TURNS: list[Any] = [
    ("I keep bees in Utrecht.", "Noted."),
    ("My hives are called Ada and Grace.", "Lovely names."),
    {"user": "What do you have on me?", "tool_calls": [{"name": "recorder_notes", "arguments": {}}],
     "assistant": "Bees in Utrecht."},
    {"user": "Fail on purpose.", "tool_calls": [{"name": "recorder_fail", "arguments": {"why": "asked to"}}],
     "assistant": "It failed."},
    {"new_session": True, "user": "Hello again.", "assistant": "Hi."},
]


def calls_of(home: Path, plugin: str, user: str | None = None) -> list[dict[str, Any]]:
    base = home / "hermes-compat" / plugin
    files = sorted(base.rglob("calls.jsonl")) if user is None else sorted(
        (base / "users").glob(f"{user}-*/calls.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_lifecycle_tools_and_prompt(core_home: Path, user_home: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    before = listing(user_home)
    report = run(core_home, TURNS, providers=["file_memory", "hermes-recorder"],
                 config="hermes-recorder:\n  greeting: hello\n", monkeypatch=monkeypatch)
    assert "hermes-recorder" in report.providers
    assert {"recorder_notes", "recorder_fail"} <= set(report.tools)  # both OpenAI shapes
    notes = report.turns[2]["tool_calls"][0]
    assert notes["ok"] and "Utrecht" in json.loads(notes["result"])["notes"]
    failed = report.turns[3]["tool_calls"][0]
    assert json.loads(failed["result"]) == {"error": "asked to"}
    # recall of turn 2 is turn 1's words, fenced and labelled in the prompt
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    assert any("Utrecht" in block for block in recall_in_prompt("hermes-recorder"))
    calls = calls_of(core_home, "recorder")
    inits = [c for c in calls if c["event"] == "initialize"]
    # once per session: the first one, then again after /new (it has no on_session_switch)
    assert [c["session_id"] for c in inits] == [report.turns[0]["session_id"],
                                                report.turns[4]["session_id"]]
    home = core_home / "hermes-compat" / "recorder"
    first = inits[0]
    assert first["kwargs"]["hermes_home"] == str(home)
    assert first["kwargs"]["agent_context"] == "primary" and first["kwargs"]["platform"] == "cli"
    assert first["constants_home"] == str(home)  # the stand-in get_hermes_home()
    assert first["env_home"] == str(core_home / "hermes-compat")
    assert sum(c["event"] == "sync_turn" for c in calls) == len(TURNS)
    ended = [c for c in calls if c["event"] == "on_session_end"]
    assert ended and ended[0]["roles"] == ["assistant", "tool", "user"]
    assert json.loads((home / "recorder.json").read_text()) == {"greeting": "hello"}  # save_config
    assert any(c["event"] == "shutdown" for c in calls)
    # the skipped registrations are named, the rest kept
    assert listing(user_home) == before


def test_the_old_sessions_end_reaches_an_object_still_initialising_the_next(
        core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After /new the next session's prompt initialises the object at once, while the old
    session's on_session_end is still queued: a slow initialize used to let that end see the
    object between sessions and be dropped. It must arrive, whole."""
    slow = hermes_style.RECORDER.replace(
        "    def initialize(self, session_id, **kwargs):\n",
        "    def initialize(self, session_id, **kwargs):\n"
        "        import time\n"
        "        if self.session is not None:\n"
        "            time.sleep(1.5)  # the second session's: long enough for the queued end\n")
    assert slow != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", slow)
    run(core_home, TURNS, providers=["file_memory", "hermes-recorder"], monkeypatch=monkeypatch)
    ended = [c for c in calls_of(core_home, "recorder") if c["event"] == "on_session_end"]
    assert [c["count"] for c in ended] == [12, 2]
    assert ended[0]["roles"] == ["assistant", "tool", "user"]


def test_memory_writes_are_mirrored(core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    turns = [{"user": "Remember I like tea.", "tool_calls": [{"name": "memory", "arguments": {
        "action": "add", "target": "user", "content": "Likes tea."}}], "assistant": "Saved."}]
    run(core_home, turns, providers=["file_memory", "hermes-recorder"], monkeypatch=monkeypatch)
    writes = [c for c in calls_of(core_home, "recorder") if c["event"] == "on_memory_write"]
    assert writes == [{"event": "on_memory_write", "action": "add", "target": "user",
                       "content": "Likes tea."}]


def test_messages_only_for_signatures_that_take_them_and_switch(core_home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    drop_folder_plugin(core_home, "switcher", hermes_style.SWITCHER)
    report = run(core_home, [("one", "1"), {"new_session": True, "user": "two", "assistant": "2"}],
                 providers=["hermes-switcher"], monkeypatch=monkeypatch)
    calls = calls_of(core_home, "switcher")
    syncs = [c for c in calls if c["event"] == "sync_turn"]
    assert syncs[0]["messages"] == [{"role": "user", "content": "one"},
                                    {"role": "assistant", "content": "1"}]
    assert [c["event"] for c in calls].count("initialize") == 1  # it follows switches itself
    switch = next(c for c in calls if c["event"] == "switch")
    assert switch == {"event": "switch", "new": report.turns[1]["session_id"],
                      "parent": report.turns[0]["session_id"], "reset": True,
                      # Hermes' word for /new; ``rewound`` only when true, as Hermes passes it
                      "kwargs": {"reason": "new_session"}}


def _host(core_home: Path, config: str) -> RecordingHost:
    loaded = parse_config_text(config, core_home / "config.yaml")
    host = RecordingHost.load(core_home, config=loaded, entry_points=False, directories=False,
                              plugins=[("hermes_compat", bridge)])
    assert isinstance(host, RecordingHost)
    return host


def test_user_scope_one_provider_per_user(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    host = _host(core_home, "memory:\n  scope: user\n  providers: [hermes-recorder]\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        alice = Session("s-a", attributes={"user_id": "alice"})
        bob = Session("s-b", attributes={"user_id": "bob"})
        for session, words in ((alice, "Alice likes chess"), (bob, "Bob likes go")):
            provider.sync_turn(Message("user", words), Message("assistant", "ok"), session, [])
        recalled = provider.prefetch("games?", alice)
        assert "chess" in recalled and "Bob" not in recalled
        assert "Bob likes go" in provider.prefetch("games?", bob)
        provider.prefetch("again", alice)
        for user, session in (("alice", "s-a"), ("bob", "s-b")):
            inits = [c for c in calls_of(core_home, "recorder", user) if c["event"] == "initialize"]
            assert [c["session_id"] for c in inits] == [session]  # once, lazily
            assert inits[0]["kwargs"]["user_id"] == user
        # Hermes never initialises one object twice: without on_session_switch, a provider
        # keeps its session through a compaction, and a new session gets a new object, the
        # old one shut down first
        provider.on_session_switch(Session("s-a2", attributes={"user_id": "alice"}), alice,
                                   SwitchReason.COMPRESSION)
        provider.on_session_switch(Session("s-a3", attributes={"user_id": "alice"}),
                                   Session("s-a2", attributes={"user_id": "alice"}),
                                   SwitchReason.NEW)
        events = [(c["event"], c.get("session_id")) for c in calls_of(core_home, "recorder", "alice")
                  if c["event"] in ("initialize", "shutdown")]
        assert events == [("initialize", "s-a"), ("shutdown", None), ("initialize", "s-a3")]
    finally:
        host.shutdown()


def test_a_memory_write_reaches_only_the_object_of_the_session_that_wrote(core_home: Path) -> None:
    """Under memory.scope: user each user has an object; a write made in alice's first session
    (the memory review's, landing after her /new moved her object on) goes to alice's object,
    never to the one made first (bob's); a write of a session no object served goes nowhere."""
    from hermes_core.types import MemoryWrite

    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    host = _host(core_home, "memory:\n  scope: user\n  providers: [hermes-recorder]\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        bob = Session("s-bob", attributes={"user_id": "bob"})
        alice = Session("s-alice-1", attributes={"user_id": "alice"})
        provider.system_prompt_block(bob)  # bob's object is made first
        provider.system_prompt_block(alice)
        provider.on_session_switch(Session("s-alice-2", attributes={"user_id": "alice"}), alice,
                                   SwitchReason.NEW)
        for session_id, words in (("s-alice-1", "Alice's secret"), ("s-nobody", "stray")):
            provider.on_memory_write(MemoryWrite("add", "user", words, origin="memory_review",
                                                 session_id=session_id, provider="file_memory"))
        def writes(user: str) -> list[str]:
            return [c["content"] for c in calls_of(core_home, "recorder", user)
                    if c["event"] == "on_memory_write"]
        assert writes("alice") == ["Alice's secret"]
        assert writes("bob") == []
    finally:
        host.shutdown()


def test_two_hermes_providers_in_one_replay(core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    drop_folder_plugin(core_home, "switcher", hermes_style.SWITCHER)
    report = run(core_home, [("I keep bees.", "ok"), ("What do I keep?", "Bees.")],
                 providers=["file_memory", "hermes-recorder", "hermes-switcher"],
                 monkeypatch=monkeypatch)
    assert report.providers == ["file_memory", "hermes-recorder", "hermes-switcher"]
    assert "bees" in report.turns[1]["prefetch"][1]["text"]
    assert len([c for c in calls_of(core_home, "switcher") if c["event"] == "sync_turn"]) == 2


def test_hermes_context_engine(core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    turns: list[Any] = [(f"message number {i} " + "words " * 40, f"reply {i}") for i in range(4)]
    turns.append({"user": "how many compactions?", "tool_calls": [
        {"name": "keeplast_count", "arguments": {}}], "assistant": "Some."})
    # the bridge tells the engine the model's window (update_model), as Hermes does; the
    # delegate_task schema is left out so the tiny window holds the same turns as before it
    report = run(core_home, turns, providers=["file_memory"], engine="hermes-keeplast",
                 config="llm:\n  context_window: 2000\ndelegation:\n  enabled: false\n",
                 monkeypatch=monkeypatch)
    assert report.engine == "hermes-keeplast"
    compactions = [c for t in report.turns for c in t["compactions"]]
    assert compactions and all(c["engine"].endswith("hermes-keeplast") for c in compactions)
    assert all(c["engine_report"] == {"hermes_engine": "keeplast"} for c in compactions)
    assert compactions[0]["messages_after"] < compactions[0]["messages_before"]
    count = json.loads(report.turns[-1]["tool_calls"][0]["result"])["compactions"]
    assert count == len(compactions)


def test_a_slow_first_prefetch_warms_off_the_turn(core_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider whose first prefetch takes long (loading a model) is "warming": the turn waits
    only part of the prefetch deadline, reports no missed deadline, and the provider joins the
    recall once its first call has ended."""
    import conftest

    drop_folder_plugin(core_home, "slowstart", hermes_style.SLOW_START)
    home = core_home / "hermes-compat" / "slowstart"

    class Gate(conftest.SpyLLM):
        """The model of the first turn lets the provider finish loading and waits until it has
        (real state: the line its first prefetch writes when done), so the next turn is warm."""

        def respond(self, **kw: Any) -> Any:
            if not conftest.SpyLLM.requests:
                (home / "release").write_text("", encoding="utf-8")
                deadline = time.monotonic() + 30
                while not any(c["event"] == "loaded" for c in calls_of(core_home, "slowstart")):
                    assert time.monotonic() < deadline, "the first prefetch never ended"
                    time.sleep(0.01)
            return super().respond(**kw)

    monkeypatch.setattr(conftest, "SpyLLM", Gate)
    report = run(core_home, [("I grow tomatoes in Gouda.", "Nice."),
                             ("What do I grow?", "Tomatoes.")],
                 providers=["file_memory", "hermes-slowstart"],
                 config="memory:\n  prefetch_timeout: 0.5\n", monkeypatch=monkeypatch)
    first, second = report.turns
    assert not [p for t in report.turns for p in t["hook_problems"] if "slowstart" in p["plugin"]]
    mine = [p for p in first["prefetch"] if p["provider"] == "hermes-slowstart"]
    assert mine and mine[0]["status"] == "fresh" and not mine[0]["text"]  # warming: no recall
    recalled = [p for p in second["prefetch"] if p["provider"] == "hermes-slowstart"]
    assert "tomatoes in Gouda" in recalled[0]["text"]
    assert [c["event"] for c in calls_of(core_home, "slowstart")] == ["loading", "loaded"]


def test_pre_compress_and_the_flush_writes_reach_hermes_providers(core_home: Path) -> None:
    """Before a compaction Hermes calls ``on_pre_compress(messages)`` (OpenAI-shaped) and puts
    the text into the summary prompt; the pre-compaction flush's memory writes reach
    ``on_memory_write`` with Hermes' metadata, ``execution_context`` "flush"."""
    from hermes_core.types import MemoryWrite

    drop_folder_plugin(core_home, "flusher", hermes_style.FLUSHER)
    host = _host(core_home, "memory:\n  providers: [hermes-flusher]\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        session = Session("s-1")
        text = provider.on_pre_compress([Message("user", "My hives: Ada, Grace."),
                                         Message("assistant", "Noted.")], session)
        assert text == "Keep: the user's hives are Ada and Grace."
        for origin in ("memory_flush", "assistant_tool"):
            provider.on_memory_write(MemoryWrite("add", "user", f"by {origin}", origin=origin,
                                                 session_id="s-1", provider="file_memory"))
        calls = calls_of(core_home, "flusher")
        assert calls[0] == {"event": "on_pre_compress", "messages": [
            {"role": "user", "content": "My hives: Ada, Grace."},
            {"role": "assistant", "content": "Noted."}]}
        writes = [c for c in calls if c["event"] == "on_memory_write"]
        assert writes[0]["metadata"] == {"write_origin": "memory_flush", "execution_context": "flush",
                                         "session_id": "s-1", "tool_name": "memory",
                                         "platform": "cli", "provider": "file_memory"}
        assert writes[1]["metadata"]["execution_context"] == "foreground"
    finally:
        host.shutdown()


def test_the_old_sessions_end_reaches_the_object_before_it_moves_to_the_next(
        core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermes delivers a session's on_session_end before the provider is moved to the next
    session (its providers keep the session id in their own state: a later end would file the
    old transcript under the new session). After /new the new prompt is built at once, while
    the old session's end waits on the plugin's lane: the object must still be in the old
    session when that end runs."""
    bound = hermes_style.RECORDER.replace(
        '        self._log("on_session_end", count=len(messages),',
        '        self._log("on_session_end", bound=self.session, count=len(messages),')
    assert bound != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", bound)
    report = run(core_home, TURNS, providers=["file_memory", "hermes-recorder"],
                 monkeypatch=monkeypatch)
    calls = [c for c in calls_of(core_home, "recorder")
             if c["event"] in ("initialize", "on_session_end")]
    first, second = report.turns[0]["session_id"], report.turns[4]["session_id"]
    assert [(c["event"], c.get("session_id", c.get("bound"))) for c in calls] == [
        ("initialize", first), ("on_session_end", first), ("initialize", second),
        ("on_session_end", second)]
