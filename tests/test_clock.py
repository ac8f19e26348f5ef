"""hermes_core.clock: a pinned "now" stamps messages and sessions, in its own context only."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from hermes_core import clock
from hermes_core.types import Message, Session


def test_pinned_now_stamps_messages_and_sessions_and_unpins():
    day = datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    with clock.frozen_at(day):
        assert clock.now() == day.timestamp() and clock.now_datetime() == day
        assert Message("user", "hi").timestamp == day.timestamp()
        assert Session(id="s").started_at == day.timestamp()
        with clock.frozen_at(datetime(2024, 1, 1)):  # naive means UTC
            assert clock.now_datetime() == datetime(2024, 1, 1, tzinfo=UTC)
        assert clock.now() == day.timestamp()
    before = time.time()
    assert before - 5 < Message("user", "hi").timestamp < time.time() + 5


def test_the_pin_stays_in_its_thread():
    seen: list[float] = []
    with clock.frozen_at(0.0):
        worker = threading.Thread(target=lambda: seen.append(clock.now()))
        worker.start()
        worker.join(10)
        assert clock.now() == 0.0
    assert seen and seen[0] > 1_000_000_000  # the other thread saw the wall clock
    clock.set_now(42.0)
    try:
        assert clock.now() == 42.0
    finally:
        clock.set_now(None)
    assert clock.now() > 1_000_000_000
