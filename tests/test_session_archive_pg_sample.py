"""PostgreSQL archive search: every match ranked up to the budget; beyond it a sample spread over
all history (not the newest): the newest matches of each of 8 equal slices of message ids."""

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


def test_migrations_3_and_5_shape_the_table(pg_archive: PgSessionArchive) -> None:
    names = {r[0] for r in pg_archive.db.read(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'messages'")}
    assert {"messages_tsv_bucket", "messages_cjk_runs"} <= names
    assert "messages_tsv" not in names  # the two-column index answers word-only queries too
    assert pg_archive.db.read("SELECT version FROM hermes_schema WHERE component = "
                              "'session_archive'")[0][0] >= 5
    # migration 5: the tsvector stays in the row (ranking reads no TOAST), frequent vacuums
    storage = pg_archive.db.read("SELECT attstorage FROM pg_attribute WHERE attrelid = "
                                 "'messages'::regclass AND attname = 'tsv'")[0][0]
    assert storage == "m"
    options = pg_archive.db.read("SELECT reloptions FROM pg_class WHERE relname = 'messages'")
    assert "autovacuum_vacuum_insert_scale_factor=0.02" in options[0][0]


def test_a_long_message_keeps_its_search_vector_in_the_row(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """Ranking reads every match's tsvector: a long message's content goes out of line (TOAST),
    its tsvector stays in the row (before migration 5 the tsvector, the largest value, went
    out first)."""
    words = " ".join(f"w{i:04d}q{(i * 7919) % 10007}" for i in range(300))  # tsvector ~4.5 kB
    pg_archive.append_message("long", Message("tool", words, tool_name="terminal"))
    toast = pg_archive.db.read("SELECT reltoastrelid::regclass::text FROM pg_class "
                               "WHERE relname = 'messages'")[0][0]
    chunks = pg_archive.db.read(f"SELECT chunk_id, sum(octet_length(chunk_data)) FROM {toast} "
                                "GROUP BY chunk_id")
    content_size = pg_archive.db.read("SELECT pg_column_size(content) FROM messages "
                                      "ORDER BY id DESC LIMIT 1")[0][0]
    assert len(chunks) == 1 and abs(int(chunks[0][1]) - int(content_size)) <= 16
    ids, _ = candidates(pg_archive, "w0299q" + str((299 * 7919) % 10007), limit=50)
    assert len(ids) == 1


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


def test_the_index_count_is_the_number_of_matches(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """How many match is read from the text index (EXPLAIN ANALYZE of its bitmap scan): exact for
    words, an upper bound for a phrase (phrases are checked on the rows)."""
    def count(text: str) -> int | None:
        search = pg_search._Search(pg_archive, "WITH RECURSIVE lineage(num) AS (SELECT 0)",
                                   {"q": pg_search.tsquery_text(build_query(text).strict or "")},
                                   100, None)
        return search.index_count()

    assert count("harbour") == 420
    # with the lineage of the current session excluded (session_search): the statements carry
    # the lineage CTE, whose own index scans must not be taken for the text index's
    from hermes_core.plugins.memory.session_archive.store import LINEAGE_CTE

    search = pg_search._Search(pg_archive, LINEAGE_CTE, {"q": "'harbour'", "sid": "s00"}, 100,
                               None)
    assert search.index_count() == 420
    assert count("lighthouse") == 12
    assert count("harbour crane") == 420
    assert count("zeppelin") == 0
    assert count('"weather the"') is not None and count('"weather the"') >= 0


def test_correlated_words_are_counted_not_estimated(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """"harbour crane": the planner multiplies the two words' frequencies (~147 of 1,200) but
    they always come together (420): the count decides, so 420 <= 500 is ranked exactly and
    420 > 300 is sampled."""
    ids, broad = candidates(pg_archive, "harbour crane", limit=500)
    assert len(ids) == 420 and broad == []
    ids, broad = candidates(pg_archive, "harbour crane", limit=300)
    assert broad == [True] and len(ids) < 420


@pytest.mark.parametrize("way", ["rows", "bitmap", "filter"])
def test_a_sample_is_the_newest_matches_of_each_eighth_of_history(pg_archive, monkeypatch,  # type: ignore[no-untyped-def]
                                                                  way: str) -> None:
    """The sample reads SLICES stretches, each at the end of one of SLICES equal slices of ids;
    whether the stretches are read by testing their rows, through a bitmap of their ids and the
    text index, or by testing the ids of the text index's matches gives the same sample."""
    monkeypatch.setattr(pg_search, "_stretch_way", lambda rows, total: way)
    ids, broad = candidates(pg_archive, "harbour", limit=100)
    assert broad == [True]
    low, high = pg_archive.db.read("SELECT min(id), max(id) FROM messages")[0]
    step = (high - low + 1) // pg_search.SLICES
    every = {r[0] for r in pg_archive.db.read(
        "SELECT id FROM messages WHERE tsv @@ to_tsquery('english', 'harbour')")}
    for k in range(pg_search.SLICES):
        end = low + (k + 1) * step - 1
        mine = sorted(i for i in ids if low + k * step <= i <= end)
        assert mine, f"nothing from slice {k + 1}"
        # the newest matches of the slice: no match of the slice newer than one taken is left out
        assert {i for i in every if mine[0] <= i <= end} == set(mine)


def test_sparse_matches_are_filtered_by_id_without_the_primary_key(pg_archive, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The "filter" way tests the stretches on the text index's matches: the statement's plan
    reads the text index and no primary-key range (where "bitmap" may: same rows either way)."""
    monkeypatch.setattr(pg_search, "_stretch_way", lambda rows, total: "filter")
    statements: list[str] = []
    real = type(pg_archive.db).read

    def spy(self, sql, params=()):  # type: ignore[no-untyped-def]
        statements.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(type(pg_archive.db), "read", spy)
    candidates(pg_archive, "harbour", limit=100)
    sampled = [s for s in statements if "BETWEEN" in s]
    assert sampled and all("(m.id + 0) BETWEEN" in s for s in sampled)
    q = {"q": pg_search.tsquery_text(build_query("harbour").strict or ""), "cap": 2048}
    plan = pg_archive.db.read_with(
        {"enable_seqscan": "off"}, "EXPLAIN (FORMAT JSON) " + sampled[0], q)
    text = str(plan)
    assert "messages_tsv_bucket" in text and "messages_pkey" not in text


def test_the_cheaper_way_to_read_a_sample_is_chosen() -> None:
    """A frequent word at 1M messages (100k matches, stretches of ~5k rows): its posting lists
    cost more than testing the rows; a word in 4k (stretches of ~120k ids) is read through the
    bitmap of the stretches' ids; a rarer one (2,700 matches, stretches of ~190k ids) visits
    every match rather than build that bitmap; at 100k messages a word in 5k (stretches of
    ~10k rows) uses the bitmap."""
    assert pg_search._stretch_way(5_184, 98_745) == "rows"
    assert pg_search._stretch_way(117_000, 4_349) == "bitmap"
    assert pg_search._stretch_way(193_520, 2_659) == "filter"
    assert pg_search._stretch_way(10_240, 5_000) == "bitmap"


def test_an_append_never_uses_a_session_row_not_yet_committed(pg_url: str) -> None:
    """A session another thread is creating (its transaction not committed yet) is not in the id
    cache: an append to it waits for that row instead of inserting against a missing session
    (a foreign-key error, and a message that was not stored)."""
    import threading

    from hermes_core.types import Session

    archive = PgSessionArchive(parse_storage_url(pg_url))
    created, release = threading.Event(), threading.Event()

    class Watched:
        """The archive's re-entrant writer lock, saying when another thread waits for it."""

        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.waiting = inner, threading.Event()

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if self.inner.acquire(blocking=False):
                return True
            self.waiting.set()
            return self.inner.acquire(blocking, timeout)

        def release(self) -> None:
            self.inner.release()

        def __enter__(self) -> None:
            self.acquire()

        def __exit__(self, *exc: object) -> None:
            self.release()

    lock = archive.db.lock = Watched(archive.db.lock)

    def opening(con) -> None:  # type: ignore[no-untyped-def]
        archive._create_from(con, Session(id="s-new", platform="webhook"))
        created.set()
        release.wait(10)  # the transaction stays open while the other thread appends

    opener = threading.Thread(target=archive._write, args=(opening,))
    opener.start()
    assert created.wait(10)
    errors: list[BaseException] = []

    def append() -> None:
        try:
            archive.append_message("s-new", Message("user", "while it was being created"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    appender = threading.Thread(target=append)
    appender.start()
    # until the append waits for the opener (on the archive's writer lock), or has ended
    for _ in range(3000):  # bounded: 30 s
        if not appender.is_alive() or lock.waiting.wait(0.01):
            break
    release.set()
    opener.join(10)
    appender.join(10)
    assert errors == []
    assert [m.content for m in archive.messages("s-new")] == ["while it was being created"]
    archive.close()


def test_search_tool_echoes_are_left_out_of_every_path(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """The search tools' own call and output are no candidates: ranked word matches test the
    row in the ranking statement, CJK runs and substrings are checked after reading."""
    from hermes_core.types import ToolCall

    call = ToolCall(id="c1", name="session_search", arguments={"query": "zebrafish 部署计划"})
    pg_archive.append_messages("echo", [
        Message("user", "what about the quokka"),
        Message("assistant", "zebrafish 部署计划 whom", tool_calls=[call]),
        Message("tool", "zebrafish habitat 部署计划 whom", tool_name="session_search",
                tool_call_id="c1"),
        Message("tool", "a context_search result: zebrafish", tool_name="context_search"),
    ])
    pg_archive.append_messages("real", [Message("user", "zebrafish 部署计划 whom, a long one "
                                                + "padding " * 200)])
    real = {r[0] for r in pg_archive.db.read(
        "SELECT m.id FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        "WHERE s.id = 'real'")}
    for text in ("zebrafish", "zebrafish OR walrus", "部署计划", "部署", "whom"):
        ids, _ = candidates(pg_archive, text, limit=1000)
        assert set(ids) == real, text
    # both words only in the echo: the any-word fallback finds the real message alone
    assert {h.session_id for h in search_messages(pg_archive, "zebrafish habitat").hits} == {
        "real"}
    assert [h.session_id for h in search_messages(pg_archive, "quokka").hits] == ["echo"]


def test_a_query_within_the_budget_is_read_without_counting(pg_archive, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An estimate within the budget: the matches are read at once (no count of the index); an
    estimate that was too low ("harbour crane": estimated ~150, 420 match) is counted after
    the read overflowed, so the sample is the one a count-first search takes."""
    counts: list[int | None] = []
    real = pg_search._Search.index_count

    def spy(self):  # type: ignore[no-untyped-def]
        counts.append(real(self))
        return counts[-1]

    monkeypatch.setattr(pg_search._Search, "index_count", spy)
    ids, broad = candidates(pg_archive, "lighthouse", limit=50)
    assert len(ids) == 12 and broad == [] and counts == []
    ids, broad = candidates(pg_archive, "harbour crane", limit=300)
    assert broad == [True] and counts == [420]
    # the same sample as a search told the true count from the start
    search = pg_search._Search(pg_archive, "WITH RECURSIVE lineage(num) AS (SELECT 0)",
                               {"q": pg_search.tsquery_text(build_query("harbour crane").strict
                                                            or "")}, 300, None)
    low, high = pg_archive.db.read("SELECT min(id), max(id) FROM messages")[0]
    where = [pg_search._INDEXED_MATCH, pg_search._not_echo()]
    counted = sorted(c.id for c in search.ranked(where, low, high, 420.0))
    assert sorted(ids) == counted


def test_several_reads_in_one_round_trip(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """read_many answers each statement as read does; read_with's settings hold for its query
    alone (sent with it in one round trip)."""
    db = pg_archive.db
    statements = [("SELECT count(*) FROM messages WHERE tsv @@ to_tsquery('english', :q)",
                   {"q": "lighthouse"}), ("SELECT min(id), max(id) FROM messages", ()),
                  ("SELECT id FROM messages WHERE id < 0", ())]
    assert db.read_many(statements) == [db.read(sql, params) for sql, params in statements]
    assert db.read_with({"work_mem": "7MB"}, "SELECT current_setting('work_mem')") == [("7MB",)]
    assert db.read("SELECT current_setting('work_mem')") != [("7MB",)]
    # a failing statement fails the batch with the archive's error; the connection stays usable
    from hermes_core.plugins.memory.session_archive.errors import ArchiveError

    for _ in range(3):  # more times than the pool has connections to hand out
        with pytest.raises(ArchiveError, match="division by zero"):
            db.read_many([("SELECT 1", ()), ("SELECT 1 / 0", ()), ("SELECT 2", ())])
    assert db.read_many([("SELECT 1", ()), ("SELECT 2", ())]) == [[(1,)], [(2,)]]
    for _ in range(3):
        with pytest.raises(ArchiveError, match="division by zero"):
            db.read_with({"work_mem": "7MB"}, "SELECT 1 / 0")
    assert db.read("SELECT current_setting('work_mem')") != [("7MB",)]
    assert db.read("SELECT 3") == [(3,)]


@pytest.mark.parametrize(("text", "limit", "roles", "exclude", "echoes", "one"), [
    ("harbour crane", 300, None, None, 0, True),  # 420 match (estimated ~150): sampled
    ("harbour crane", 500, None, None, 0, True),  # within the budget: every match ranked
    ("harbour crane", 300, None, "s03", 0, True),  # session_search: the lineage left out
    ("harbour crane", 300, ("user", "tool"), None, 0, True),
    ("harbour", 500, None, None, 0, True),  # one word estimated within the budget
    ("harbour", 1000, None, "s03", 0, True),
    # one word estimated above the budget: counted in the index, then read (two statements)
    ("harbour", 300, None, None, 0, False),
    # 620 match, 420 once the search tool's own outputs are left out
    ("harbour crane", 500, None, None, 200, True),
    ("harbour crane", 400, None, None, 200, True),
])
def test_one_statement_counts_and_reads_what_two_would(pg_archive, monkeypatch, text: str,  # type: ignore[no-untyped-def]
                                                       limit: int, roles, exclude,
                                                       echoes: int, one: bool) -> None:
    """The count and the read in one statement (_count_and_read) rank the same candidates, with
    the same scores, as counting in the index first and reading the stretches after. It is
    taken for an estimate up to twice the budget for several words, up to the budget for one
    word (whose count in the index costs little)."""
    if echoes:
        pg_archive.append_messages("echoes", [
            Message("tool", f"earlier: the harbour crane, result {i}", tool_name="session_search")
            for i in range(echoes)])
    pg_archive.db.write_one("ANALYZE messages")  # the planner's estimates, as autovacuum makes them
    calls: list[object] = []
    real = pg_search._Search._count_and_read

    def spy(self, *args):  # type: ignore[no-untyped-def]
        calls.append(real(self, *args))
        return calls[-1]

    monkeypatch.setattr(pg_search._Search, "_count_and_read", spy)

    def run() -> tuple[list[tuple[int, float]], list[bool]]:
        broad: list[bool] = []
        found = pg_search.pg_candidates(pg_archive, build_query(text), limit=limit, broad=broad,
                                        roles=roles, exclude_lineage_of=exclude)
        return [(c.id, c.score) for c in found], broad

    first = run()
    if one:
        assert calls and calls[0] is not None, "the one-statement read was not taken"
    else:
        assert calls == []
    monkeypatch.setattr(pg_search, "ONE_READ_BELOW", 0)
    monkeypatch.setattr(pg_search._Search, "_count_and_read", lambda self, *args: None)
    assert run() == first


def test_an_underestimate_past_the_count_limit_falls_back_to_the_index_count(pg_archive, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """"harbour crane" is estimated at ~150 and matches 420: with a budget of 100 the one
    statement stops after 401 matches and the index count sizes the sample instead."""
    pg_archive.db.write_one("ANALYZE messages")
    counts: list[int | None] = []
    ones: list[object] = []
    real, real_one = pg_search._Search.index_count, pg_search._Search._count_and_read

    def spy(self):  # type: ignore[no-untyped-def]
        counts.append(real(self))
        return counts[-1]

    def spy_one(self, *args):  # type: ignore[no-untyped-def]
        ones.append(real_one(self, *args))
        return ones[-1]

    monkeypatch.setattr(pg_search._Search, "index_count", spy)
    monkeypatch.setattr(pg_search._Search, "_count_and_read", spy_one)
    ids, broad = candidates(pg_archive, "harbour crane", limit=100)
    assert ones == [None] and counts == [420] and broad == [True]
    every = {r[0] for r in pg_archive.db.read(
        "SELECT id FROM messages WHERE tsv @@ to_tsquery('english', 'harbour & crane')")}
    assert ids and set(ids) <= every and len(ids) < 420


@pytest.mark.parametrize("text", ["deploym*", "deployme*", "harbou*", "lightho*"])
def test_prefixes_past_the_porter_stem_on_postgresql(pg_archive, text: str) -> None:  # type: ignore[no-untyped-def]
    """A prefix longer than the stored stem ("deploym*": "deployment" is stored as "deploy") is
    widened by the words the index holds, as on SQLite; the lookup used SQLite's syntax and
    failed every prefix search on PostgreSQL."""
    pg_archive.append_messages("deploy", [Message("user", "the deployment of the billing service")])
    hits = search_messages(pg_archive, text).hits
    assert hits
    if text.startswith("deploy"):
        assert {h.session_id for h in hits} == {"deploy"}
