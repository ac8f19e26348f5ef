"""``forget`` on Hindsight: matching memories are listed with their documents; none is deleted,
because the API deletes whole documents only (the report says so)."""

from __future__ import annotations

from hermes_core_hindsight import HindsightMemory

from hermes_core.types import ForgetReport, Message, Session


def test_forget_lists_matches_and_explains_why_it_cannot_delete(provider: HindsightMemory,
                                                                 fake) -> None:  # type: ignore[no-untyped-def]
    session = Session(id="s-1")
    provider.sync_turn(user_message=Message("user", "I moved to Lisbon last spring"),
                       assistant_message=Message("assistant", "Nice."), session=session,
                       messages=[])
    assert provider.retains.wait_idle(5)
    report = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert isinstance(report, ForgetReport) and report.matched >= 1 and report.deleted == 0
    assert "deletes whole documents" in (report.cannot_delete or "")
    assert "s-1" in (report.cannot_delete or "")
    assert not any(method == "DELETE" for method, *_ in fake.requests)
    nothing = provider.forget(subject="Atlantis", scope="all", dry_run=True)
    assert nothing.matched == 0 and nothing.cannot_delete is None


def test_forget_scrubs_the_spool_so_a_late_send_brings_nothing_back(hermes_home, fake) -> None:  # type: ignore[no-untyped-def]
    from hermes_core.types import MemoryWrite

    from .conftest import build_provider

    provider = build_provider(hermes_home, fake)
    fake.retain_status = 503  # the server cannot take retains: the turns wait in the spool
    session = Session(id="s-down")
    for text in ("Good morning", "I moved to  LISBON last spring", "I keep three beehives"):
        user, assistant = Message("user", text), Message("assistant", "Noted.")
        provider.sync_turn(user_message=user, assistant_message=assistant, session=session,
                           messages=[user, assistant])
    for note in ("Lives in Lisbon", "Keeps bees"):
        provider.on_memory_write(MemoryWrite(action="add", target="user", content=note))
    assert provider.retains.wait_idle(5)
    spool = hermes_home / "hindsight" / "spool-unit.jsonl"
    assert "LISBON" in spool.read_text()
    fake.retain_status = None  # the server answers again; the spool has not been sent yet

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert dry.matched == 2 and dry.deleted == 0  # a turn and a note, still waiting
    assert sum("pending" in item for item in dry.items) == 2
    assert "LISBON" in spool.read_text()  # a preview changes nothing

    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 2 and "lisbon" not in spool.read_text().casefold()

    fake.requests.clear()
    assert provider.retains.deliver().error is None  # the spool is sent
    sent = [item["content"] for body in fake.calls("/memories") for item in body["items"]]
    assert sent == ["User: Good morning\nAssistant: Noted.",
                    "User: I keep three beehives\nAssistant: Noted.", "Keeps bees"]
    assert not spool.exists()
    provider.shutdown()


def test_forget_scrubs_refused_retains_and_unreadable_spool_lines(hermes_home, fake) -> None:  # type: ignore[no-untyped-def]
    """Retains the server refused (``rejected-<bank>.jsonl``) and spool lines nobody could read
    are never sent again, but they kept the forgotten subject's text on disk after forget."""
    from .conftest import build_provider

    provider = build_provider(hermes_home, fake)
    fake.retain_status = 422  # refused for good: the turns go to the rejected file
    for text in ("I moved to  LISBON last spring", "I keep three beehives"):
        user, assistant = Message("user", text), Message("assistant", "Noted.")
        provider.sync_turn(user_message=user, assistant_message=assistant,
                           session=Session(id="s-refused"), messages=[user, assistant])
    assert provider.retains.wait_idle(5)
    fake.retain_status = None
    rejected = hermes_home / "hindsight" / "rejected-unit.jsonl"
    assert "LISBON" in rejected.read_text() and "beehives" in rejected.read_text()
    unreadable = hermes_home / "hindsight" / "spool-unit.jsonl.unreadable"
    unreadable.write_text('{"items": [{"content": "User: lisbon\n{"items": [{"content": "bees\n')

    dry = provider.forget(subject="lisbon", scope="all", dry_run=True)
    assert sum("refused" in i or "unreadable" in i for i in dry.items) == 2 and dry.deleted == 0
    assert "LISBON" in rejected.read_text()  # a preview changes nothing
    done = provider.forget(subject="lisbon", scope="all", dry_run=False)
    assert done.deleted == 2
    assert "lisbon" not in rejected.read_text().casefold() and "beehives" in rejected.read_text()
    assert unreadable.read_text() == '{"items": [{"content": "bees\n'
    provider.shutdown()
