"""The word share of the archive's hybrid fusion (word_share.py), on both backends (a SQLite file
and a real PostgreSQL database): a message holding most of a question's rare words is lifted over
one holding a single common word of it, the floor is respected, and without an embedder the word
search is what it was."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from archive_support import make_archive  # noqa: E402

from hermes_core.embeddings import GuardedEmbedder  # noqa: E402
from hermes_core.kinds import Embedder  # noqa: E402
from hermes_core.plugins.memory.session_archive import SessionArchive, hybrid  # noqa: E402
from hermes_core.plugins.memory.session_archive.hybrid import (  # noqa: E402
    Policy,
    hybrid_candidates,
)
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex  # noqa: E402
from hermes_core.plugins.memory.session_archive.vectors import reindex  # noqa: E402
from hermes_core.plugins.memory.session_archive.word_share import (  # noqa: E402
    _PgFrequencies,
    question_terms,
    word_shares,
)
from hermes_core.types import Message, Session  # noqa: E402

QUESTION = "When is my dentist appointment in Leeds?"
RARE = "The dentist in Leeds moved my appointment to Friday"
COMMON = "Another appointment came up"
FILLER = ["The appointment with the bank went fine", "My appointment at the garage is Monday",
          "Rain all weekend", "We watched a film", "The train was late again",
          "Dinner with Sam was lovely"]


class Table(Embedder):
    """The question and the message with a single common word of it point the same way; the
    message holding the question's rare words is further off; everything else is unrelated."""

    name = "table"
    dimension = 2
    model_id = "table-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            if t in (QUESTION, COMMON):
                out.append([1.0, 0.0])
            elif t == RARE:
                out.append([0.6, 0.8])
            else:
                out.append([0.0, 1.0])
        return out


@pytest.fixture()
def archive(tmp_path: Path, storage_url: str | None):
    """A small archive on each backend: one message per session."""
    a = make_archive(tmp_path, storage_url)
    t = 1_700_000_000.0
    for k, text in enumerate([RARE, COMMON, *FILLER]):
        a.open_session(Session(id=f"s{k}", started_at=t + k))
        a.append_messages(f"s{k}", [Message("user", text, timestamp=t + k)])
    yield a
    a.close()


def ids_of(a: SessionArchive) -> dict[str, int]:
    return {text: int(i) for i, text in a.db.read("SELECT id, content FROM messages")}


def idf(n: int, df: int) -> float:
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


def test_the_question_terms_are_stemmed_content_words() -> None:
    assert question_terms(QUESTION) == {"dentist": "dentist", "appoint": "appointment",
                                        "leed": "leeds"}
    assert question_terms("what is it?") == {}


def test_a_message_holding_the_rare_words_has_the_larger_share(archive: SessionArchive) -> None:
    ids = ids_of(archive)
    shares = word_shares(archive, QUESTION, list(ids.values()))
    n = len(ids)
    rare, common = idf(n, 1), idf(n, 4)  # dentist and leeds once; appointment in 4 messages
    total = 2 * rare + common
    assert shares[ids[RARE]] == pytest.approx(1.0)
    assert shares[ids[COMMON]] == pytest.approx(common / total)
    assert shares[ids[COMMON]] < 0.3 <= shares[ids[RARE]]
    assert ids["Rain all weekend"] not in shares
    # only the ids asked about are answered
    assert set(word_shares(archive, QUESTION, [ids[COMMON]])) == {ids[COMMON]}
    # a second call reads the frequencies from the cache and answers the same
    assert word_shares(archive, QUESTION, list(ids.values())) == shares


def scores(a: SessionArchive, w: Policy) -> dict[int, float]:
    """Each found message's fused score (higher is better), first found first."""
    g = GuardedEmbedder(Table(None, None))
    reindex(a, g)
    index = VectorIndex(a)
    index.refresh(g.dimension)
    found = hybrid_candidates(a, QUESTION, g, index, weights=w).found
    return {c.id: -c.score for c in found}


def test_the_share_lifts_the_rare_words_over_a_common_one(archive: SessionArchive) -> None:
    ids = ids_of(archive)
    off = scores(archive, replace(Policy(), share=0.0))
    on = scores(archive, replace(Policy(), share=1.0, share_floor=0.3))
    assert next(iter(off)) == ids[COMMON]  # by meaning alone the common word's message is first
    assert next(iter(on)) == ids[RARE]
    assert on[ids[RARE]] == pytest.approx(off[ids[RARE]] + 1.0)  # its share is 1.0
    # below the floor: the common word's message gains nothing
    assert on[ids[COMMON]] == pytest.approx(off[ids[COMMON]])
    # a floor above every share: nothing changes
    assert scores(archive, replace(Policy(), share=1.0, share_floor=1.01)) == pytest.approx(off)


def test_without_an_embedder_the_word_search_is_unchanged(
        archive: SessionArchive, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = hybrid_candidates(archive, QUESTION, None, None, weights=replace(Policy(), share=0.0))

    def never(*args: object) -> None:
        raise AssertionError("the word share is read only for the fusion")

    monkeypatch.setattr(hybrid, "word_shares", never)
    shared = hybrid_candidates(archive, QUESTION, None, None,
                               weights=replace(Policy(), share=1.0))
    assert [(c.id, c.score) for c in shared.found] == [(c.id, c.score) for c in plain.found]
    assert shared.matched == plain.matched and shared.problem == plain.problem


def test_a_message_stored_since_counts_at_once(archive: SessionArchive) -> None:
    """The frequencies (kept on PostgreSQL while no message is stored) follow a new message."""
    before = ids_of(archive)
    assert word_shares(archive, QUESTION, list(before.values()))[before[RARE]] == 1.0
    archive.open_session(Session(id="s-new", started_at=1_800_000_000.0))
    archive.append_messages("s-new", [Message("user", "A new dentist", timestamp=1_800_000_000.0)])
    ids = ids_of(archive)
    shares = word_shares(archive, QUESTION, list(ids.values()))
    n = len(ids)
    total = idf(n, 2) + idf(n, 1) + idf(n, 4)  # dentist twice now
    assert shares[ids["A new dentist"]] == pytest.approx(idf(n, 2) / total)
    assert shares[ids[COMMON]] == pytest.approx(idf(n, 4) / total)


def test_the_kept_counts_are_renewed_past_one_percent_more_messages() -> None:
    kept = _PgFrequencies()
    assert kept._stale(None) and kept._stale(5000)  # nothing counted yet; an empty archive
    kept.newest, kept.size = 5000, 1000
    assert not kept._stale(5000) and not kept._stale(5010)  # 10 of 1,000 stored since: kept
    assert kept._stale(5011)  # 11: renewed
    assert kept._stale(4999)  # the newest message counted is gone
    kept.size = 99
    assert kept._stale(5001)  # under 100 messages every message stored renews them


def test_sqlite_counts_the_messages_once_then_follows_every_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On SQLite the number of messages is counted once per connection, not per query; what the
    archive stores or deletes since (a rolled-back write included) is followed exactly, and a
    commit by another connection, or a schema change, has it counted again."""
    from hermes_core.plugins.memory.session_archive import forget, word_share

    path = tmp_path / "state.db"
    a = SessionArchive(path)
    t = 1_700_000_000.0
    for k, text in enumerate([RARE, COMMON, *FILLER]):
        a.open_session(Session(id=f"s{k}", started_at=t + k))
        a.append_messages(f"s{k}", [Message("user", text, timestamp=t + k)])
    counted: list[int] = []
    count = a.count_messages
    monkeypatch.setattr(a, "count_messages", lambda: counted.append(1) or count())

    def check(recounted: bool) -> None:
        """The shares equal those from a fresh count; counted for them only if ``recounted``."""
        ids = list(ids_of(a).values())
        before = len(counted)
        kept = word_shares(a, QUESTION, ids)
        assert word_share._sqlite_size(a) == len(ids)  # kept, or followed: exact
        assert len(counted) - before == int(recounted)
        word_share._SQLITE_SIZES.pop(a)
        assert word_shares(a, QUESTION, ids) == kept  # counted afresh: the same
        assert word_share._sqlite_size(a) == len(ids) == count()

    check(True)
    check(False)  # nothing changed: not counted again
    a.open_session(Session(id="s-new", started_at=t + 50))
    a.append_messages("s-new", [Message("user", "A new dentist", timestamp=t + 50),
                                Message("assistant", "Noted", timestamp=t + 51)])
    check(False)  # two stored by this archive: followed, not counted
    forget.delete_sessions(a, "s-new")
    check(False)  # and deleted

    def stored_then_failed(con: object) -> None:
        a.db.insert_many(con, "INSERT INTO messages(session, role, content, timestamp) "
                         "VALUES (1, 'user', 'rolled back dentist', 1.0)", [()])
        raise RuntimeError("the write fails")

    with pytest.raises(RuntimeError):
        a.db.write(stored_then_failed)
    check(False)  # a rolled-back write changed nothing
    with SessionArchive(path) as other:  # another connection commits: counted again
        other.open_session(Session(id="s-other", started_at=t + 60))
        other.append_messages("s-other", [Message("user", "Leeds", timestamp=t + 60)])
    check(True)
    a.db.write(lambda con: con.execute("CREATE TABLE unrelated (x INTEGER)"))
    check(True)  # the schema changed (a rebuilt messages table would drop the triggers)
    a.close()


def test_sqlite_counts_for_each_query_where_the_count_cannot_be_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that cannot keep the TEMP count still gets exact shares, counted each time."""
    from hermes_core.plugins.memory.session_archive import word_share

    monkeypatch.setattr(word_share, "_COUNTER", ("CREATE TEMP TABLE word_share_stored",))
    with SessionArchive(tmp_path / "state.db") as a:
        for k, text in enumerate([RARE, COMMON, *FILLER]):
            a.open_session(Session(id=f"s{k}", started_at=1_700_000_000.0 + k))
            a.append_messages(f"s{k}", [Message("user", text, timestamp=1_700_000_000.0 + k)])
        counted: list[int] = []
        count = a.count_messages
        monkeypatch.setattr(a, "count_messages", lambda: counted.append(1) or count())
        ids = ids_of(a)
        shares = word_shares(a, QUESTION, list(ids.values()))
        n = len(ids)
        assert shares[ids[RARE]] == pytest.approx(1.0)
        assert shares[ids[COMMON]] == pytest.approx(idf(n, 4) / (2 * idf(n, 1) + idf(n, 4)))
        assert word_shares(a, QUESTION, list(ids.values())) == shares
        assert len(counted) == 2 and a not in word_share._SQLITE_SIZES
