"""``forget`` against the loopback Honcho server: conclusions and card lines go; messages cannot."""

from __future__ import annotations

import json
from typing import Any

from hermes_core.types import ForgetReport, Message, Session, ToolContext

CTX = ToolContext(session=Session(id="tool-session"))


def call(provider: Any, name: str, **args: Any) -> dict[str, Any]:
    tool = next(t for t in provider.get_tools() if t.name == name)
    return json.loads(tool.invoke(args, CTX))


def test_forget_deletes_conclusions_and_card_lines_and_says_messages_stay(make_provider: Any) -> None:
    provider = make_provider()
    provider.sync_turn(user_message=Message("user", "I moved to Lisbon."),
                       assistant_message=Message("assistant", "Lisbon, nice."),
                       session=Session(id="earlier"))
    assert provider.wait_idle(5)
    call(provider, "honcho_conclude", conclusion="Lives in Lisbon")
    call(provider, "honcho_conclude", conclusion="Keeps three beehives")
    call(provider, "honcho_profile", card=["Lives in LISBON", "Uses Helix"])

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert isinstance(dry, ForgetReport) and dry.matched == 2 and dry.deleted == 0
    assert len(call(provider, "honcho_conclude", list=True)["conclusions"]) == 2

    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 2 and "no call to delete messages" in (done.cannot_delete or "")
    left = call(provider, "honcho_conclude", list=True)["conclusions"]
    assert ["Lisbon" not in json.dumps(c) for c in left] == [True]
    assert call(provider, "honcho_profile", peer="user")["card"] == ["Uses Helix"]
    # a scope for another user is refused, nothing read or deleted
    other = provider.forget(subject="Helix", scope="user:someone-else", dry_run=False)
    assert other.deleted == 0 and "one user peer" in (other.cannot_delete or "")


def test_forget_scrubs_the_outbox_so_a_late_delivery_brings_nothing_back(
        make_provider: Any, honcho_server: Any, hermes_home: Any) -> None:
    from hermes_core_honcho.testing import Fault

    from hermes_core.types import MemoryWrite

    provider = make_provider()
    session = Session(id="s-down")
    honcho_server.faults.append(Fault("status", status=503))  # Honcho is down
    for user, assistant in (("Good morning.", "Morning!"),
                            ("I moved to  LISBON last spring.", "Noted: you live in lisbon."),
                            ("I keep three beehives.", "Lovely.")):
        provider.sync_turn(user_message=Message("user", user),
                           assistant_message=Message("assistant", assistant), session=session)
    provider.on_memory_write(MemoryWrite(action="add", target="user", content="Lives in Lisbon",
                                         session_id="s-down"))
    provider.on_memory_write(MemoryWrite(action="add", target="user", content="Keeps bees",
                                         session_id="s-down"))
    assert provider.wait_idle(5)
    outbox = hermes_home / "honcho" / "outbox.jsonl"
    assert "LISBON" in outbox.read_text()  # waiting for Honcho
    honcho_server.faults.clear()  # Honcho answers again; the outbox has not been sent yet

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert dry.matched == 3 and dry.deleted == 0  # two messages and a note, all still pending
    assert sum("pending" in item for item in dry.items) == 3
    assert "LISBON" in outbox.read_text()  # a preview changes nothing

    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 3
    assert "lisbon" not in outbox.read_text().casefold()

    provider.outbox.deliver()  # the outbox is delivered
    assert provider.wait_idle(5) and not outbox.exists()
    held = [m["content"] for m in honcho_server.store.messages("test-ws", "s-down")]
    assert held == ["Good morning.", "Morning!", "I keep three beehives.", "Lovely."]
    left = call(provider, "honcho_conclude", list=True)["conclusions"]
    assert [c["content"] for c in left] == ["Keeps bees"]


def test_forget_scrubs_refused_jobs_and_unreadable_outbox_lines(
        make_provider: Any, honcho_server: Any, hermes_home: Any) -> None:
    """Jobs Honcho refused (``honcho/rejected.jsonl``) and outbox lines nobody could read are
    never sent again, but they kept the forgotten subject's text on disk after forget."""
    from hermes_core_honcho.testing import Fault

    provider = make_provider()
    honcho_server.faults.append(Fault("status", status=422, path="messages"))  # refused for good
    provider.sync_turn(user_message=Message("user", "I moved to  LISBON."),
                       assistant_message=Message("assistant", "Noted."),
                       session=Session(id="s-refused"))
    assert provider.wait_idle(5)
    honcho_server.faults.clear()
    rejected = hermes_home / "honcho" / "rejected.jsonl"
    assert "LISBON" in rejected.read_text()
    unreadable = hermes_home / "honcho" / "outbox.jsonl.unreadable"
    unreadable.write_text('{"kind": "conclude", "content": "Lives in Lis\\u0062on\n'
                          '{"kind": "conclude", "content": "Keeps bees\n')

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert dry.matched == 2 and dry.deleted == 0
    assert "LISBON" in rejected.read_text()  # a preview changes nothing
    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 2
    assert "lisbon" not in rejected.read_text().casefold()
    assert "Noted." in rejected.read_text()  # the rest of the refused job is kept
    assert unreadable.read_text() == '{"kind": "conclude", "content": "Keeps bees\n'
