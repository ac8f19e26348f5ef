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
