"""Derived memory replayed from recorded model answers (hermes_core.testing.recorded).

A recording maps each prompt's hash to the words a model answered; replayed by the loopback
Messages API server, the same turns give the same facts offline. The recording here was made
through :class:`RecordingClient` from the scripted model of test_session_archive_derive (no
real model is reachable where these tests run); one recorded from a real model replays the same
way. ``tests/data/derive_recording.json`` is such a file, committed: regenerate it with
``HERMES_CORE_RECORD=1 pytest tests/test_derive_recorded.py`` after changing the prompt.
"""

from __future__ import annotations

import os
from pathlib import Path

from derive_support import make_host, provider_of, scripted, settle, start

from hermes_core.plugins.memory.session_archive.facts import derivation_state, list_facts
from hermes_core.testing import MessagesAPIServer, Recording, RecordingClient, prompt_hash
from hermes_core.types import Message

DATA = Path(__file__).parent / "data" / "derive_recording.json"
#: fixed times, so the prompts (which carry the turn's date) are the same on every run
T0 = 1_767_000_000.0


def conversation(host: object) -> None:
    s1 = start(host, "r1", "alice")  # type: ignore[arg-type]
    for i, (user, reply) in enumerate([("Our team is based in Porto these days", "Nice."),
                                        ("I can't handle spicy food, by the way", "Noted."),
                                        ("Big news: I moved the team to Lisbon", "Congrats!")]):
        for j, (role, text) in enumerate((("user", user), ("assistant", reply))):
            host.hooks.on_message(  # type: ignore[attr-defined]
                message=Message(role, text, timestamp=T0 + 86_400 * i + j), session=s1)
        settle(host)  # type: ignore[arg-type]


def facts_of(host: object) -> list[tuple[str, bool]]:
    return [(f.text, f.current) for f in list_facts(provider_of(host).archive, user="alice")]


def record(home: Path) -> tuple[Recording, list[tuple[str, bool]]]:
    recording = Recording()
    with MessagesAPIServer(scripted) as api:
        host = make_host(home, api)
        deriver = provider_of(host).deriver
        deriver.client = RecordingClient(deriver.client, recording)
        conversation(host)
        found = facts_of(host)
        host.shutdown()
    return recording, found


def test_a_recording_replays_offline_to_the_same_facts(tmp_path: Path) -> None:
    recording, recorded_facts = record(tmp_path / "rec")
    assert len(recording.answers) == 3 and ("The user moved the team to Lisbon", True) in (
        recorded_facts)
    path = tmp_path / "recording.json"
    recording.save(path)
    replayed = Recording.load(path)
    with MessagesAPIServer(replayed.responder) as api:
        host = make_host(tmp_path / "replay", api)
        conversation(host)
        assert facts_of(host) == recorded_facts
        assert replayed.missing == []
        assert {prompt_hash(b["system"], b["messages"]) for b in api.bodies} == set(
            recording.answers)
        host.shutdown()


def test_the_committed_recording_replays(tmp_path: Path) -> None:
    if os.environ.get("HERMES_CORE_RECORD") == "1":
        recording, _ = record(tmp_path / "rec")
        recording.save(DATA)
    replayed = Recording.load(DATA)
    with MessagesAPIServer(replayed.responder) as api:
        host = make_host(tmp_path, api)
        conversation(host)
        assert replayed.missing == [], "the prompt changed: record again (see the module doc)"
        assert facts_of(host) == [("The user moved the team to Lisbon", True),
                                  ("The user cannot eat spicy food", True),
                                  ("The user's team is based in Porto", False)]
        host.shutdown()


def test_an_unrecorded_prompt_is_a_failing_model_naming_its_hash(tmp_path: Path) -> None:
    replayed = Recording({})
    with MessagesAPIServer(replayed.responder) as api:
        host = make_host(tmp_path, api)
        conversation(host)
        state = derivation_state(provider_of(host).archive)
        assert state.facts == 0 and state.backlog == 3  # nothing skipped: tried again later
        assert replayed.missing and replayed.missing[0] in (state.error or "")
        host.shutdown()
