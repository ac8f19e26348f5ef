"""hermes_core.storage.spool: ``Spool.scrub`` (what a ``forget`` does to records still waiting),
alone, against a delivery under way in this process, and against one whose spool is scrubbed
through another ``Spool`` (as another process does). Real files and real threads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hermes_core.storage.spool import Spool


def ns(spool: Spool) -> list[int]:
    return [e.record["n"] for e in spool.pending()]


def drop_secret(record: dict[str, Any]) -> dict[str, Any] | None:
    return None if "secret" in record.get("text", "") else record


def release_when_waiting(spool: Spool, release: threading.Event) -> None:
    """Let the send under way end once ``scrub`` waits for it (not before)."""
    wait_sent = spool._wait_sent

    def waiting(key: str | None, deadline: float) -> None:
        release.set()
        wait_sent(key, deadline)

    spool._wait_sent = waiting  # type: ignore[method-assign]


class Blocking:
    """A ``send`` that holds the record ``n == hold`` until released, and keeps what it got."""

    def __init__(self, hold: int) -> None:
        self.hold, self.got = hold, []
        self.sending, self.release = threading.Event(), threading.Event()

    def __call__(self, record: dict[str, Any]) -> None:
        if record["n"] == self.hold:
            self.sending.set()
            assert self.release.wait(10)
        self.got.append(record["n"])


def test_scrub_drops_and_rewrites_in_place_and_keeps_the_rest_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "text": "hello"}, {"n": 2, "text": "a secret"},
                 {"n": 3, "text": "more"}, {"n": 4, "text": "secret again", "keep": True})

    def edit(record: dict[str, Any]) -> dict[str, Any] | None:
        if "secret" not in record["text"]:
            return record
        return {**record, "text": "[gone]"} if record.get("keep") else None

    done = spool.scrub(edit)
    assert [r["n"] for r in done.removed] == [2, 4] and done.in_flight == [] and done.settled
    assert [e.record for e in spool.pending()] == [
        {"n": 1, "text": "hello"}, {"n": 3, "text": "more"},
        {"n": 4, "text": "[gone]", "keep": True}]
    assert "secret" not in spool.path.read_text()
    spool.append({"n": 5, "text": "after"})  # appends go on as before
    assert ns(spool) == [1, 3, 4, 5]
    assert spool.scrub(lambda record: None).removed and not spool.path.exists()
    assert Spool(tmp_path / "missing" / "s.jsonl").scrub(lambda record: None).removed == []


def test_a_delivery_under_way_sends_nothing_scrubbed_after_it_started(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append(*({"n": n, "text": "secret" if n == 3 else "plain"} for n in range(1, 6)))
    send = Blocking(hold=1)
    worker = threading.Thread(target=spool.deliver, args=(send,))
    worker.start()
    assert send.sending.wait(10)  # record 1 is on its way; 2..5 wait their turn
    done = spool.scrub(drop_secret)
    assert [r["n"] for r in done.removed] == [3]
    send.release.set()
    worker.join(10)
    assert send.got == [1, 2, 4, 5] and not spool.has_pending()


def test_another_spool_object_scrubbing_stops_the_delivery_too(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    spool, other = Spool(path), Spool(path)  # as a forget in another process opens it
    spool.append(*({"n": n, "text": "secret" if n in (2, 4) else "plain"} for n in range(1, 6)))
    send = Blocking(hold=1)
    worker = threading.Thread(target=spool.deliver, args=(send,))
    worker.start()
    assert send.sending.wait(10)
    assert [r["n"] for r in other.scrub(drop_secret).removed] == [2, 4]
    send.release.set()
    worker.join(10)
    assert send.got == [1, 3, 5] and not spool.has_pending()


def test_the_record_being_sent_is_reported_not_silently_sent(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "text": "secret"}, {"n": 2, "text": "secret"}, {"n": 3, "text": "x"})
    send = Blocking(hold=1)
    worker = threading.Thread(target=spool.deliver, args=(send,))
    worker.start()
    assert send.sending.wait(10)
    late = spool.scrub(drop_secret, wait=0)  # cannot wait: record 1 is still on its way
    assert [r["n"] for r in late.removed] == [2]
    assert [r["n"] for r in late.in_flight] == [1] and not late.settled
    send.release.set()
    worker.join(10)
    assert send.got == [1, 3] and not spool.has_pending()


def test_scrub_waits_for_the_send_under_way_then_reports_it_landed(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "text": "secret"}, {"n": 2, "text": "plain"})
    send = Blocking(hold=1)
    worker = threading.Thread(target=spool.deliver, args=(send,))
    worker.start()
    assert send.sending.wait(10)
    release_when_waiting(spool, send.release)  # the send ends while scrub waits for it
    done = spool.scrub(drop_secret, wait=10)
    worker.join(10)
    assert done.settled and [r["n"] for r in done.in_flight] == [1] and done.removed == []
    assert send.got == [1, 2] and not spool.has_pending()


def test_a_failed_send_leaves_its_record_to_be_scrubbed(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "text": "secret"}, {"n": 2, "text": "plain"})
    started, release = threading.Event(), threading.Event()

    def failing(record: dict[str, Any]) -> None:
        started.set()
        assert release.wait(10)
        raise OSError("down")

    worker = threading.Thread(target=spool.deliver, args=(failing,))
    worker.start()
    assert started.wait(10)
    release_when_waiting(spool, release)
    done = spool.scrub(drop_secret, wait=10)
    worker.join(10)
    assert done.settled and done.in_flight == [] and [r["n"] for r in done.removed] == [1]
    assert ns(spool) == [2]


def test_scrub_covers_refused_records_and_unreadable_lines(tmp_path: Path) -> None:
    """What a delivery set aside (the rejected spool) and lines nobody can read (cut short in the
    spool, or moved to ``.unreadable``) held a scrubbed subject's text after the scrub."""
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "text": "a secret"}, {"n": 2, "text": "fine"})
    assert spool.deliver(lambda r: (_ for _ in ()).throw(ValueError("no")),
                         refused=lambda exc: True).rejected == 2
    aside = tmp_path / "s.rejected.jsonl"
    unreadable = tmp_path / "s.jsonl.unreadable"
    unreadable.write_bytes(b'{"n": 3, "text": "the SE\\u0043RET\n{"n": 4, "text": "plain\n')
    spool.append({"n": 5, "text": "secret too"}, {"n": 6, "text": "kept"})
    with open(spool.path, "ab") as fh:
        fh.write(b'{"n": 7, "text": "Secret, cut')  # a crash cut this append short

    def mentions(text: str) -> bool:
        return "secret" in text.casefold()

    before = {p: p.read_bytes() for p in (spool.path, aside, unreadable)}
    dry = spool.scrub(drop_secret, mentions=mentions, dry_run=True)
    assert [r["n"] for r in dry.removed] == [5] and [r["n"] for r in dry.rejected] == [1]
    assert len(dry.unreadable) == 2
    assert {p: p.read_bytes() for p in before} == before  # a dry run changes nothing

    done = spool.scrub(drop_secret, mentions=mentions)
    assert [r["n"] for r in done.removed] == [5] and [r["n"] for r in done.rejected] == [1]
    assert [t[:8] for t in done.unreadable] == ['{"n": 3,', '{"n": 7,']
    assert ns(spool) == [6] and unreadable.read_bytes() == b'{"n": 4, "text": "plain\n'
    assert ns(Spool(aside)) == [2]
    assert "secret" not in b"".join(p.read_bytes() for p in before).decode().casefold()


def test_a_refusal_reason_quoting_the_subject_is_blanked(tmp_path: Path) -> None:
    """A receiver's refusal often echoes what it refused (a validation error quoting the input):
    a refused record rewritten by the scrub kept that reason, subject included."""
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1, "parts": ["hello", "a secret"]}, {"n": 2, "parts": ["fine"]})

    def send(record: dict[str, Any]) -> None:
        raise ValueError(f"422: input {record['parts']!r} is invalid")

    assert spool.deliver(send, refused=lambda exc: True).rejected == 2

    def edit(record: dict[str, Any]) -> dict[str, Any] | None:
        return {**record, "parts": [p for p in record["parts"] if "secret" not in p]}

    done = spool.scrub(edit, mentions=lambda text: "secret" in text.casefold())
    assert [r["n"] for r in done.rejected] == [1]
    kept = [e.record for e in Spool(tmp_path / "s.rejected.jsonl").pending()]
    assert [r["parts"] for r in kept] == [["hello"], ["fine"]]
    assert "secret" not in (tmp_path / "s.rejected.jsonl").read_text()
    assert kept[1]["rejected"] == "422: input ['fine'] is invalid"  # the others keep theirs
