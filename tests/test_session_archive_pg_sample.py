"""PostgreSQL archive search: every match ranked up to the budget; beyond it an even sample of
all history (not the newest), read through the (bucket, word) index of migration 3."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hermes_core.plugins.memory.session_archive import pg_search
from hermes_core.plugins.memory.session_archive.pg_store import PgSessionArchive
from hermes_core.plugins.memory.session_archive.query import build_query
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.storage import parse_storage_url
from hermes_core.types import Message


@pytest.fixture
def pg_archive(pg_url: str) -> Iterator[PgSessionArchive]:
    archive = PgSessionArchive(parse_storage_url(pg_url))
    # 1,200 messages in 30 sessions; "harbour" is in every third, "lighthouse" in 12 messages
    for s in range(30):
        archive.append_messages(f"s{s:02d}", [
            Message("user", f"message {s}-{i} about the " + ("harbour crane " if i % 3 == 0 else "")
                    + ("lighthouse keeper " if i == 7 and s < 12 else "") + "and the weather")
            for i in range(40)])
    yield archive
    archive.close()


def candidates(archive: PgSessionArchive, text: str, limit: int) -> tuple[list[int], list[bool]]:
    broad: list[bool] = []
    found = pg_search.pg_candidates(archive, build_query(text), limit=limit, broad=broad)
    return [c.id for c in found], broad


def test_migration_3_builds_the_bucket_index(pg_archive: PgSessionArchive) -> None:
    names = {r[0] for r in pg_archive.db.read(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'messages'")}
    assert {"messages_tsv_bucket", "messages_cjk_runs"} <= names
    assert "messages_tsv" not in names  # the two-column index answers word-only queries too
    assert pg_archive.db.read("SELECT version FROM hermes_schema WHERE component = "
                              "'session_archive'")[0][0] >= 3


def test_every_match_is_ranked_when_there_are_at_most_the_budget(pg_archive) -> None:  # type: ignore[no-untyped-def]
    ids, broad = candidates(pg_archive, "lighthouse", limit=50)
    assert len(ids) == 12 and broad == []
    ids, broad = candidates(pg_archive, "harbour", limit=500)  # 420 matches, budget 500
    assert len(ids) == 420 and broad == []


def test_a_broad_query_ranks_an_even_sample_of_all_history(pg_archive) -> None:  # type: ignore[no-untyped-def]
    ids, broad = candidates(pg_archive, "harbour", limit=100)  # 420 matches, budget 100
    assert broad == [True]
    assert 10 <= len(ids) <= 400
    everything = sorted(r[0] for r in pg_archive.db.read(
        "SELECT id FROM messages WHERE tsv @@ to_tsquery('english', 'harbour')"))
    assert set(ids) <= set(everything)
    # spread over history: old and new matches alike, not the newest 100 (what the archive
    # used to rank); each quarter of the matches is represented
    quarter = len(everything) // 4
    for k in range(4):
        part = set(everything[k * quarter:(k + 1) * quarter])
        assert part & set(ids), f"no candidate from quarter {k + 1} of history"


def test_search_results_are_the_same_words_on_a_sample(pg_archive) -> None:  # type: ignore[no-untyped-def]
    result = search_messages(pg_archive, "harbour crane", candidate_limit=100)
    assert result.hits and all("harbour" in h.snippet for h in result.hits)


def test_stopwords_only_are_found_in_stretches_over_history(pg_archive, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(pg_search, "SLICE_ROWS", 20)  # 1,200 messages > 8 stretches of 20
    ids, broad = candidates(pg_archive, "the", limit=1000)
    assert broad == [True] and 0 < len(ids) <= 8 * 20
    low = min(ids)
    assert low < 400 < max(ids)  # from early and late history alike
    # nothing in the stretches: every message is searched, so the search is never empty
    pg_archive.append_messages("late", [Message("user", "whom")])
    ids, _ = candidates(pg_archive, "whom", limit=1000)
    assert len(ids) == 1


def test_carried_over_copies_stay_out_of_every_path(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """The text and CJK matches no longer check the carried-over mark themselves (the copies
    have no tsv and no cjk); the substring match still does."""
    pg_archive.append_message("old", Message("user", "walrus 部署计划 whom"))
    pg_archive.append_message("new", Message("user", "walrus 部署计划 whom",
                                             meta={"carried_over": "old"}))
    for text in ("walrus", "部署计划", "部署", "whom"):
        ids, _ = candidates(pg_archive, text, limit=1000)
        assert len(ids) == 1, text
