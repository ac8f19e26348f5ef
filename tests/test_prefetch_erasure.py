"""A recall kept by the prefetch runner never outlives an erasure of the stores.

The runner serves a provider's last answer when the provider is late (``stale``). That answer
was made from the stores as they were: once ``hermes-core forget`` (another process: here
:func:`record_erasure`, which it calls) has erased something, no answer made before it may be
served, neither the one kept from an earlier turn nor a late one that lands after the erasure.
The provider is a throwaway one with a real ``forget``; its late calls wait on events.
"""

from __future__ import annotations

import threading
import time

import pytest
from agent_support import make_host

from hermes_core import ForgetReport, MemoryProvider, Session, hookimpl
from hermes_core.prefetch import PrefetchRunner
from hermes_core.storage.erasures import record_erasure

SESSION = Session(id="s1")
PLUGIN = "memory-provider:notes"


class Notes(MemoryProvider):
    """Recalls its notes; a call waits on ``hold`` while it is set (a late answer)."""

    name = "notes"
    notes = ["lives in Lisbon"]
    hold: threading.Event | None = None
    started = threading.Event()

    @hookimpl
    def prefetch(self, query, session):
        text = "; ".join(Notes.notes) or None  # read from the store when the call starts
        Notes.started.set()
        if Notes.hold is not None:
            assert Notes.hold.wait(10), "the test never released the late prefetch"
        return text

    @hookimpl
    def forget(self, subject, scope, dry_run):
        hits = [n for n in Notes.notes if subject.casefold() in n.casefold()]
        if not dry_run:
            Notes.notes = [n for n in Notes.notes if n not in hits]
        return ForgetReport(self.name, matched=len(hits), deleted=0 if dry_run else len(hits),
                            dry_run=dry_run, items=hits)


@pytest.fixture
def notes():
    Notes.notes, Notes.hold, Notes.started = ["lives in Lisbon"], None, threading.Event()
    yield Notes
    if Notes.hold is not None:
        Notes.hold.set()  # no thread outlives the test


def forget_lisbon(home, host) -> None:
    """What ``hermes-core forget Lisbon`` does to this provider and to running servers."""
    host.hooks.forget(subject="Lisbon", scope="all", dry_run=False)
    generation = record_erasure("forget", home=home, config_url=False)
    bound = time.monotonic() + 10  # the host reuses a read made in the last few milliseconds
    while host.heed_erasures() != generation and time.monotonic() < bound:
        time.sleep(0.001)  # poll interval while waiting for the host to read the new value
    assert host.heed_erasures() == generation


def wait_idle(runner: PrefetchRunner) -> None:
    bound = time.monotonic() + 10
    while runner._lanes[PLUGIN].busy and time.monotonic() < bound:
        time.sleep(0.005)  # poll interval while waiting on the lane's state
    assert not runner._lanes[PLUGIN].busy


def test_the_answer_kept_from_before_a_forget_is_not_served_after_it(home, notes):
    host = make_host(home, providers=[notes])
    runner = PrefetchRunner(host, timeout=2.0)
    assert runner.run("where do I live?", SESSION)[0].text == "lives in Lisbon"
    forget_lisbon(home, host)
    notes.hold = threading.Event()  # the next call is late: the runner serves its last answer
    late = runner.run("where do I live?", SESSION)[0]
    assert late.status == "stale"
    assert "Lisbon" not in late.text
    notes.hold.set()
    wait_idle(runner)
    runner.close()
    host.shutdown()


def test_a_late_answer_made_before_a_forget_is_not_served_after_it(home, notes):
    host = make_host(home, providers=[notes])
    runner = PrefetchRunner(host, timeout=0.2)
    runner.run("warm up", SESSION)  # the erasure generation is read once
    notes.hold = first = threading.Event()
    assert runner.run("where do I live?", SESSION)[0].status == "stale"  # still reading
    assert notes.started.wait(10)
    forget_lisbon(home, host)
    assert "Lisbon" not in runner.run("and now?", SESSION)[0].text  # the lane is still busy
    first.set()  # the answer read before the forget lands now
    wait_idle(runner)
    notes.hold = threading.Event()  # the next call is late too
    late = runner.run("where do I live?", SESSION)[0]
    assert late.status == "stale"
    assert "Lisbon" not in late.text
    notes.hold.set()
    wait_idle(runner)
    runner.close()
    host.shutdown()
