"""The webhook's delivery records on both backends (issue 33 item 3): claim, answer, release,
conflict, take-over, forget; the PostgreSQL schema upgraded in place from schema 1."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from hermes_core.plugins.platforms.webhook.deliveries import (
    Deliveries,
    DeliveryConflict,
    DeliveryStoreUnavailable,
)
from hermes_core.storage import close_pools, parse_storage_url


def _open(tmp_path: Path, storage_url: str | None) -> Deliveries:
    records = (Deliveries(url=parse_storage_url(storage_url)) if storage_url
               else Deliveries(home=tmp_path))
    records.open()
    return records


def sha(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def test_claim_answer_release_conflict_and_take_over(tmp_path: Path, storage_url: str | None):
    one = _open(tmp_path, storage_url)
    assert one.claim("m1", sha("a")).outcome == "new"
    one.answer("m1", 200, {"reply": "hello"})
    again = one.claim("m1", sha("a"))
    assert (again.outcome, again.status, again.body) == ("answered", 200, {"reply": "hello"})
    with pytest.raises(DeliveryConflict, match="'m1'"):
        one.claim("m1", sha("b"))
    # a failed turn gives its claim up: the retry runs
    assert one.claim("m2", sha("x")).outcome == "new"
    one.release("m2")
    assert one.claim("m2", sha("x")).outcome == "new"
    # a claim left running by a process that died: the next in line takes it over, and the dead
    # process's late answer (another owner) cannot overwrite it
    other = _open(tmp_path, storage_url)
    assert other.claim("m2", sha("x")).outcome == "new"
    one.answer("m2", 200, {"reply": "late"})
    other.answer("m2", 200, {"reply": "mine"})
    assert other.claim("m2", sha("x")).body == {"reply": "mine"}
    # forget erases the kept answers that mention the subject
    assert other.erase_mentions("HELLO", dry_run=True) == ["m1"]
    assert other.erase_mentions("hello", dry_run=False) == ["m1"]
    erased = other.claim("m1", sha("a"))
    assert erased.status == 410 and "hello" not in str(erased.body)
    one.close()
    other.close()
    close_pools()


def test_the_postgresql_schema_is_upgraded_in_place(pg_url: str) -> None:
    from hermes_core.plugins.platforms.webhook.replays import COMPONENT, MIGRATIONS
    from hermes_core.storage.migrations import migrate, schema_versions
    from hermes_core.storage.pool import get_pool

    url = parse_storage_url(pg_url)
    pool = get_pool(url)
    with pool.connection() as con:  # a database made by the release before: schema 1
        migrate(con, url, COMPONENT, MIGRATIONS[:1])
        con.execute("INSERT INTO webhook_replays (mac, seen_at) VALUES (%s, %s)", (b"m", 1.0))
    close_pools()
    records = _open(Path("."), pg_url)
    assert records.claim("m1", sha("a")).outcome == "new"
    records.close()
    pool = get_pool(url)
    with pool.connection() as con:
        assert schema_versions(con)[COMPONENT] == 2
        assert con.execute("SELECT count(*) FROM webhook_replays").fetchone()[0] == 1
    close_pools()


def test_a_newer_sqlite_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "webhook.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 7")
    con.close()
    with pytest.raises(DeliveryStoreUnavailable, match="newer hermes-core"):
        Deliveries(home=tmp_path).open()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 7
    con.close()


@pytest.mark.parametrize(("reply", "subject"), [
    # a backslash, doubled in JSON
    ("Your share is C:\\Users\\maria\\payroll.xlsx, as asked.", "users\\maria\\payroll"),
    # the subject across a line break (whitespace, as forget matches)
    ("Sent to:\nMaria Costa", "to: maria costa"),
    # quotes, escaped in JSON
    ('The "Maria" plan is on hold.', '"Maria" plan'),
])
def test_forget_matches_a_kept_answer_as_the_reader_sees_it(tmp_path: Path,
                                                          storage_url: str | None,
                                                          reply: str, subject: str) -> None:
    """The kept answer is JSON; forget matches its text as written, not its JSON escapes (the
    archive's copy of the same reply is matched that way, and deleted)."""
    records = _open(tmp_path, storage_url)
    assert records.claim("m1", sha("a")).outcome == "new"
    records.answer("m1", 200, {"reply": reply})
    assert records.erase_mentions(subject, dry_run=False) == ["m1"]
    erased = records.claim("m1", sha("a"))
    assert erased.status == 410 and "maria" not in str(erased.body).lower()
    records.close()
    close_pools()


def test_a_forget_for_one_user_leaves_the_kept_answers_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept answers are not kept per user, so a user-scoped forget (a front end's, or an inspect
    user token's) deletes none of them and says so, as the hook's contract asks: it must not
    erase other users' answers, nor tell by its counts whether theirs mention a subject."""
    import hermes_core.plugins.platforms.webhook as webhook

    monkeypatch.setenv("HERMES_CORE_HOME", str(tmp_path))
    monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    records = _open(tmp_path, None)
    assert records.claim("m1", sha("a")).outcome == "new"
    records.answer("m1", 200, {"reply": "alice's salary is 120k"})
    records.close()
    for dry_run in (True, False):
        report = webhook.forget(subject="salary is 120k", scope="user:bob", dry_run=dry_run)
        assert report is not None and (report.matched, report.deleted) == (0, 0)
        assert report.cannot_delete and "scope 'all'" in report.cannot_delete
    records = _open(tmp_path, None)
    assert records.claim("m1", sha("a")).body == {"reply": "alice's salary is 120k"}
    records.close()
    assert webhook.forget(subject="salary is 120k", scope="all", dry_run=False).deleted == 1
