"""A forget that lands while the derivation lane is asking the model about a turn.

The model is shown the user's current facts; one of them is forgotten while it answers, and its
answer updates that fact, quoting it ("moving away from Lisbon"), from a message that does not
mention the subject. Once the forget has finished, no stored fact may mention it. The model is
the only fake (a loopback Messages API through the real anthropic client); the forget is the
command's own sequence (note, delete, mark done); the archive is real, on both backends.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from derive_support import make_host, prompt_of, provider_of, settle, start, turn

from hermes_core.plugins.memory.session_archive.fact_search import search_facts
from hermes_core.plugins.memory.session_archive.facts import list_facts
from hermes_core.storage.erasures import forget_noted, note_forget
from hermes_core.testing.messages_api import MessagesAPIServer, Reply

TURN = re.compile(r"^\[(\d+)\] user: (.*)$", re.M)
FACT = re.compile(r"^\[fact (\d+)\] \(([^,]+),[^)]*\) (.*)$", re.M)
DEADLINE = 60.0


class Model:
    """Facts about where the user lives; the answer about a move waits for ``release``."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = prompt_of(body)
        facts: list[dict[str, Any]] = []
        current = {topic: (int(i), text) for i, topic, text in FACT.findall(prompt)}
        for mid, text in TURN.findall(prompt):
            if "live in Lisbon" in text:
                facts.append({"kind": "state", "topic": "home city",
                              "text": "The user lives in Lisbon", "sources": [int(mid)]})
            if "moving to Porto" in text:
                self.asked.set()
                assert self.release.wait(DEADLINE), "the test never released the model"
                old = current.get("home city")
                where = old[1].rsplit(" ", 1)[-1] if old else "their city"
                facts.append({"kind": "state", "topic": "home city",
                              "text": f"The user is moving away from {where} to Porto",
                              "sources": [int(mid)], "supersedes": [old[0]] if old else []})
        return Reply(text=json.dumps({"facts": facts}), usage={"input_tokens": 10,
                                                               "output_tokens": 10})


def test_a_fact_derived_while_its_subject_was_forgotten_is_forgotten_too(
        tmp_path: Path, storage_url: str | None) -> None:
    model = Model()
    with MessagesAPIServer(model) as api:
        host = make_host(tmp_path, api, storage_url)
        try:
            provider = provider_of(host)
            session = start(host, "a1", "alice")
            turn(host, session, "I live in Lisbon")
            settle(host)
            assert [f.text for f in list_facts(provider.archive, user="alice")] == [
                "The user lives in Lisbon"]
            turn(host, session, "I am moving to Porto next month")
            assert model.asked.wait(DEADLINE)  # the model read the facts, Lisbon's among them
            note = note_forget("Lisbon", "all", home=tmp_path, storage_url=storage_url)
            report = provider.forget("Lisbon", "all", False)
            forget_noted(note, home=tmp_path, storage_url=storage_url)
            assert report.deleted >= 2  # the message and the fact
            model.release.set()
            settle(host)
            facts = [f.to_dict() for f in list_facts(provider.archive, all_users=True)]
            facts += search_facts(provider.archive, "where does the user live", user="alice")
            assert not [f for f in facts if "lisbon" in json.dumps(f).lower()]
        finally:
            model.release.set()
            host.shutdown()
