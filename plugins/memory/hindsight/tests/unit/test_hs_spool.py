"""The retains' spool (``hermes_core.storage.spool.Courier``) as the provider uses it: order,
retries, one attempt per turn while the server fails, nothing lost, refusals set aside."""

from __future__ import annotations

import json

from hermes_core.storage.spool import Spool
from hermes_core.types import Message, Session

from .conftest import build_provider


def turn(provider, text):
    user, assistant = Message("user", text), Message("assistant", "Noted.")
    provider.sync_turn(user, assistant, Session(id="s"), [user, assistant])


def sent(fake):
    return [b["items"][0]["content"].split("\n")[0] for b in fake.calls("/memories")]


def test_an_outage_keeps_turns_and_recovery_sends_them_in_order(hermes_home, fake):
    provider = build_provider(hermes_home, fake)
    fake.retain_status = 503
    turn(provider, "User: one")
    assert len(fake.calls("/memories")) == 3, "retain_attempts tries for the first turn"
    assert provider.retains.failing
    turn(provider, "User: two")  # while failing: kept, one background attempt
    assert provider.retains.wait_idle(5)
    assert len(fake.calls("/memories")) == 4
    spool = hermes_home / "hindsight" / "spool-unit.jsonl"
    assert [json.loads(line)["turn"] for line in spool.read_text().splitlines()] == [1, 1]
    fake.retain_status = None
    fake.requests.clear()
    turn(provider, "User: three")
    assert provider.retains.wait_idle(5)
    assert sent(fake) == ["User: User: one", "User: User: two", "User: User: three"]
    assert not spool.exists() and not provider.retains.failing
    provider.shutdown()


def test_a_refused_turn_goes_to_the_rejected_file_and_is_not_retried(hermes_home, fake):
    provider = build_provider(hermes_home, fake)
    fake.retain_status = 422
    turn(provider, "too long for the server")
    rejected = [json.loads(line) for line in
                (hermes_home / "hindsight" / "rejected-unit.jsonl").read_text().splitlines()]
    assert rejected[0]["label"] == "turn 1 of session s" and "retain refused" in rejected[0]["rejected"]
    assert len(fake.calls("/memories")) == 1
    assert not (hermes_home / "hindsight" / "spool-unit.jsonl").exists()
    provider.shutdown()


def test_a_new_start_sends_an_old_spool_before_anything_else(hermes_home, fake, monkeypatch):
    import httpx
    from hermes_core_hindsight import provider as provider_module

    real = provider_module.HindsightClient  # the stand-in's transport from the first request on
    monkeypatch.setattr(provider_module, "HindsightClient",
                        lambda *a, **kw: real(*a, transport=httpx.MockTransport(fake), **kw))
    job = {"bank": "unit", "items": [{"content": "User: left by the last run"}], "label": "old",
           "operation_id": "op-old"}
    Spool(hermes_home / "hindsight" / "spool-unit.jsonl").append(job)
    provider = build_provider(hermes_home, fake)  # its start sends the spool in the background
    assert provider.retains.wait_idle(5)
    assert sent(fake) == ["User: left by the last run"]
    turn(provider, "new")
    assert sent(fake) == ["User: left by the last run", "User: new"]
    provider.shutdown()
