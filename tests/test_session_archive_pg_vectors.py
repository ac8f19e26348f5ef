"""Semantic search on PostgreSQL with several nodes on one database (real server from the
conftest): one node embeds a given message, every node's in-memory index reads what the others
stored, a message committed late (below the indexer's cursor) still gets its vector, and a
model switch says "reindex". Two archive objects on one database stand for two nodes; the
embedder is the synonym table of test_session_archive_hybrid.py (a fake model, not an LLM)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("psycopg")

from test_session_archive_hybrid import Synonyms, SynonymsV2, top  # noqa: E402

from hermes_core.embeddings import GuardedEmbedder  # noqa: E402
from hermes_core.plugins.memory.session_archive import SessionArchive, open_archive  # noqa: E402
from hermes_core.plugins.memory.session_archive.config import SessionArchiveConfig  # noqa: E402
from hermes_core.plugins.memory.session_archive.store import _INSERT_MESSAGE  # noqa: E402
from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search  # noqa: E402
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex  # noqa: E402
from hermes_core.plugins.memory.session_archive.vector_store import (  # noqa: E402
    BUSY,
    INDEXER_LOCK,
)
from hermes_core.plugins.memory.session_archive.vectors import (  # noqa: E402
    VectorIndexer,
    index_batch,
    pending,
    reindex,
    state,
)
from hermes_core.types import Message, Session  # noqa: E402


class Counting(Synonyms):
    """Synonyms that records every text it embeds (shared by the nodes of one test)."""

    seen: list[str]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().embed(texts)


def counting(seen: list[str]) -> GuardedEmbedder:
    e = Counting(None, None)
    e.seen = seen
    return GuardedEmbedder(e)


@pytest.fixture()
def nodes(tmp_path: Path, pg_url: str) -> Iterator[tuple[SessionArchive, SessionArchive]]:
    a = open_archive(SessionArchiveConfig(path=str(tmp_path / "a.db")), tmp_path / "a", pg_url)
    b = open_archive(SessionArchiveConfig(path=str(tmp_path / "b.db")), tmp_path / "b", pg_url)
    yield a, b
    a.close()
    b.close()


def add(a: SessionArchive, sid: str, *texts: str) -> None:
    a.open_session(Session(id=sid))
    a.append_messages(sid, [Message("user", t) for t in texts])


def test_a_message_indexed_by_one_node_is_found_by_meaning_on_the_other(nodes: Any) -> None:
    a, b = nodes
    add(a, "s-dog", "We adopted a whippet from the shelter last week")
    add(b, "s-rent", "The landlord raises it from October")
    seen: list[str] = []
    ga = counting(seen)
    indexer = VectorIndexer(a, ga, batch=1)
    try:
        assert indexer.wait_done(30)
    finally:
        indexer.close()
    # node B embeds only its query; its index reads node A's vectors from the database
    gb = counting([])
    sem_b = Semantic(embedder=gb, index=VectorIndex(b))
    out = session_search(b, "what pet did we get", semantic=sem_b)
    assert top(out)[0] == "s-dog" and out["results"][0]["hits"][0]["found_by"] == "meaning"
    assert len(sem_b.index) == 2
    # a message added on B later, indexed on A: B's loaded index reads only the new row
    add(b, "s-editor", "I code in Helix now")
    assert reindex(a, ga) == 1
    out = session_search(b, "which editor", semantic=sem_b)
    assert top(out)[0] == "s-editor" and len(sem_b.index) == 3
    assert sorted(seen) == sorted(["We adopted a whippet from the shelter last week",
                                   "The landlord raises it from October", "I code in Helix now"])


def test_two_indexers_on_one_database_embed_each_message_once(nodes: Any) -> None:
    a, b = nodes
    texts = [f"note {i} about the whippet and the rent" for i in range(60)]
    for k in range(6):
        add(a if k % 2 else b, f"s{k}", *texts[k * 10:(k + 1) * 10])
    seen: list[str] = []
    ia, ib = VectorIndexer(a, counting(seen), batch=4), VectorIndexer(b, counting(seen), batch=4)
    try:
        assert ia.wait_done(60) and ib.wait_done(60)
    finally:
        ia.close()
        ib.close()
    assert sorted(seen) == sorted(texts)  # every message once, none twice
    assert state(a, None).count == 60 and pending(b) == 0


def test_a_node_finding_the_indexing_lock_taken_leaves_the_batch_to_the_holder(nodes: Any
                                                                                ) -> None:
    a, b = nodes
    add(a, "s1", "a whippet")
    held, release = threading.Event(), threading.Event()

    def hold(con: Any) -> None:  # node B's indexer in the middle of a batch
        con.execute("SELECT pg_advisory_xact_lock(?)", (INDEXER_LOCK,))
        held.set()
        release.wait(30)

    t = threading.Thread(target=b.db.write, args=(hold,))
    t.start()
    try:
        assert held.wait(30)
        g = counting([])
        assert index_batch(a, g) == BUSY and state(a, None).count == 0
    finally:
        release.set()
        t.join(30)
    assert index_batch(a, g) == 1 and state(a, None).count == 1


def test_a_message_committed_after_the_cursor_passed_it_gets_its_vector(nodes: Any) -> None:
    a, b = nodes
    add(a, "s-late", "opening words")
    add(b, "s-early", "the weather")
    num = a.db.read("SELECT num FROM sessions WHERE id = 's-late'")[0][0]
    inserted, commit = threading.Event(), threading.Event()

    def slow_append(con: Any) -> None:  # node A's append, its transaction still open
        con.execute(_INSERT_MESSAGE, (num, "user", "we adopted a whippet", None, None, None,
                                      1.0, None))
        inserted.set()
        commit.wait(30)

    t = threading.Thread(target=a.db.write, args=(slow_append,))
    t.start()
    assert inserted.wait(30)
    add(b, "s-early", "a later message about rent")  # a higher id, committed first
    g = GuardedEmbedder(Synonyms(None, None))
    index_b = VectorIndex(b)
    reindex(b, g)  # the cursor moves past the open transaction's id
    index_b.refresh(g.dimension)
    commit.set()
    t.join(30)
    assert pending(a) == 1  # seen below the cursor
    assert reindex(a, g) == 1 and pending(a) == 0
    out = session_search(b, "what pet did we get", semantic=Semantic(embedder=g, index=index_b))
    assert top(out)[0] == "s-late"
    assert index_b.ids.tolist() == sorted(index_b.ids.tolist())  # merged in id order


def test_the_database_going_away_pauses_the_indexer_and_it_resumes_after(
    nodes: Any, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The server ends every connection while the indexer embeds a batch (a restart, a
    failover): that batch is not stored and the indexer says so once, then goes on with the
    next wake-up instead of stopping for the rest of the process."""
    from pg_support import drop_connections

    a, _ = nodes
    add(a, "s-dog", "We adopted a whippet")
    seen: list[str] = []

    class OutageOnce(Counting):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if not seen:  # the batch's connection dies before its vectors are written
                drop_connections(pg_url)
            return super().embed(texts)

    e = OutageOnce(None, None)
    e.seen = seen
    indexer = VectorIndexer(a, GuardedEmbedder(e), batch=4)
    try:
        with caplog.at_level(logging.WARNING):
            assert not indexer.wait_done(30)  # the failed batch: paused, with its error
        assert indexer.error is not None and state(a, None).count == 0
        assert [r.getMessage() for r in caplog.records if "indexer" in r.getMessage()
                ] == [f"vector indexer paused: {indexer.error}; it tries again at the next "
                      "stored message or in 30 s"]
        add(a, "s-rent", "The landlord raises it from October")
        assert indexer.wait_done(30)  # the next wake-up stores both messages' vectors
        assert indexer.error is None and state(a, None).count == 2 and pending(a) == 0
    finally:
        indexer.close()
    assert seen.count("We adopted a whippet") == 2  # embedded again: nothing was skipped


def test_a_model_switch_on_one_node_says_reindex_on_the_other(nodes: Any) -> None:
    a, b = nodes
    add(a, "s-dog", "We adopted a whippet")
    reindex(a, GuardedEmbedder(Synonyms(None, None)))
    index_b = VectorIndex(b)
    g2 = GuardedEmbedder(SynonymsV2(None, None))
    out = session_search(b, "whippet", semantic=Semantic(embedder=g2, index=index_b))
    assert top(out) == ["s-dog"] and "hermes-core sessions reindex" in out["semantic"]
    reindex(a, g2)  # node A rebuilds: node B's loaded index starts again (new epoch)
    out = session_search(b, "what pet", semantic=Semantic(embedder=g2, index=index_b))
    assert top(out) == ["s-dog"] and out["semantic"] == "on"
    assert len(index_b) == 1 and state(b, g2).model == "synonyms-v2"


def test_two_providers_on_one_database_share_semantic_search(tmp_path: Path, pg_url: str,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from hermes_core.config import CoreConfig
    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.memory.session_archive import SessionArchiveProvider

    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    seen: list[str] = []

    def node(name: str) -> SessionArchiveProvider:
        g = counting(seen)
        context = PluginContext(plugin_name="session_archive", home=tmp_path / name,
                                config=CoreConfig(), logger=logging.getLogger("test"),
                                embedder=lambda: g)
        return SessionArchiveProvider(SessionArchiveConfig(), context)

    one, two = node("one"), node("two")
    try:
        one.on_message(Message("user", "we adopted a whippet"), Session(id="old"))
        one.on_message(Message("user", "grey weather today"), Session(id="other"))
        assert one.settle(30) and two.settle(30)
        out = session_search(two.archive, "my pet", current_session_id="now",
                             **two._search_settings())
        assert top(out)[0] == "old" and out["semantic"] == "on"
        assert sorted(seen[:2]) == ["grey weather today", "we adopted a whippet"]
        assert len(seen) == 3  # the two messages once, and node two's query
    finally:
        one.shutdown()
        two.shutdown()


def test_the_reindex_command_embeds_a_postgresql_archive(home: Path, pg_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from hermes_core.cli import cli

    minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    # the embedder's bound is not what this checks (its default 10 s was passed under load)
    (home / "config.yaml").write_text("embeddings:\n  timeout: 300\n")
    a = open_archive(SessionArchiveConfig(), home, pg_url)
    add(a, "s1", "the printer shows error E42 again", "clearing the queue fixed it")
    a.append_messages("s1", [Message("tool", "printer idle", tool_name="terminal")])
    a.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["sessions", "reindex", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["embedded"] == 2 == data["vectors"] and data["model"].endswith("MiniLM-L6-v2")
    again = runner.invoke(cli, ["sessions", "reindex", "--json"], catch_exceptions=False)
    assert json.loads(again.output[again.output.index("{"):])["embedded"] == 0


def test_storage_migrate_copies_the_vectors_and_the_target_embeds_nothing(
        tmp_path: Path, pg_url: str) -> None:
    """SQLite -> PostgreSQL -> SQLite: every vector arrives (the same bytes, on the target's
    ids), the target's indexer and reindex find nothing to embed, semantic search works at
    once; a second run copies nothing twice."""
    import json

    from click.testing import CliRunner

    from hermes_core.cli import cli

    home, back = tmp_path / "home", tmp_path / "back"
    home.mkdir()
    back.mkdir()
    seen: list[str] = []
    g = counting(seen)
    with SessionArchive(home / "state.db") as files:
        add(files, "s-dog", "We adopted a whippet", "from the shelter")
        add(files, "s-db", "the database migration failed", "rolled back the schema")
        files.append_messages("s-db", [Message("tool", "psql output", tool_name="terminal")])
        assert reindex(files, g) == 4
        source = {r[0]: bytes(r[1]) for r in files.db.read(
            "SELECT m.content, v.vec FROM messages AS m JOIN message_vectors AS v ON v.id = m.id")}
    seen.clear()
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": ""}
    result = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url, "--json"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    detail = json.loads(result.output)["plugins"]["session_archive"]["detail"]
    assert detail["vectors_copied"] == 4 and detail["vectors_to_rebuild"] == 0
    text = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url], env=env,
                              catch_exceptions=False).output
    assert "0 message vector(s) copied, 4 already there" in text
    database = open_archive(SessionArchiveConfig(), home, pg_url)
    try:
        copied = {r[0]: bytes(r[1]) for r in database.db.read(
            "SELECT m.content, v.vec FROM messages AS m JOIN message_vectors AS v ON v.id = m.id")}
        assert copied == source
        assert state(database, g).model == "synonyms-v1"
        assert pending(database) == 0 and index_batch(database, g) == 0
        assert reindex(database, g) == 0
        out = session_search(database, "what pet", semantic=Semantic(embedder=g,
                                                                     index=VectorIndex(database)))
        assert top(out)[0] == "s-dog"
        assert seen == ["what pet"]  # the query; no message was embedded again
    finally:
        database.close()
    env = {"HERMES_CORE_HOME": str(back), "HERMES_CORE_STORAGE_URL": ""}
    result = CliRunner().invoke(cli, ["storage", "migrate", "--from", pg_url, "--json"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with SessionArchive(back / "state.db") as returned:
        assert {r[0]: bytes(r[1]) for r in returned.db.read(
            "SELECT m.content, v.vec FROM messages AS m JOIN message_vectors AS v "
            "ON v.id = m.id")} == source
        assert pending(returned) == 0 and index_batch(returned, g) == 0
    assert seen == ["what pet"]


def test_storage_migrate_leaves_another_models_target_alone(tmp_path: Path, pg_url: str) -> None:
    from hermes_core.plugins.memory.session_archive.migrate import copy_vectors

    with SessionArchive(tmp_path / "a.db") as files:
        add(files, "s-dog", "We adopted a whippet", "from the shelter")
        assert reindex(files, GuardedEmbedder(Synonyms(None, None))) == 2
        database = open_archive(SessionArchiveConfig(), tmp_path, pg_url)
        try:
            add(database, "s-other", "a plan for the garden", "tomatoes first")
            assert reindex(database, GuardedEmbedder(SynonymsV2(None, None))) == 2
            add(database, "s-dog", "We adopted a whippet", "from the shelter")
            out = copy_vectors(files, database)
            assert out.copied == 0 and out.not_copied == 2
            assert out.problem is not None and "sessions reindex" in out.problem
            assert state(database, None).model == "synonyms-v2"
        finally:
            database.close()


@pytest.mark.parametrize("dimension", [4, 100, 384, 500])
def test_the_sign_bit_scan_ranks_like_brute_force(dimension: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan (uint8 sums of 3 words, blocks split over two threads) keeps exactly the rows
    within the Hamming cut-off, and nearest() ranks them like an exact product (no database)."""
    from hermes_core.plugins.memory.session_archive import vector_index

    monkeypatch.setattr(vector_index, "SCAN_BLOCK", 256)  # many blocks: the two-thread path
    rng = np.random.default_rng(dimension)
    n = 5000
    mat = rng.standard_normal((n, dimension))
    mat = (mat / np.linalg.norm(mat, axis=1, keepdims=True)).astype(np.float16)
    index = VectorIndex(None, rescore=200)  # type: ignore[arg-type]
    index._reset(("m", None), dimension)
    index._append([(i + 1, mat[i].tobytes()) for i in range(n)], dimension)
    signs = (mat.astype(np.float32) > 0)
    for _ in range(3):
        q = rng.standard_normal(dimension).astype(np.float32)
        q /= np.linalg.norm(q)
        hamming = (signs != (q > 0)).sum(axis=1)
        pos = index._closest(q, 200)
        cut = np.sort(hamming)[199]
        assert sorted(pos.tolist()) == np.flatnonzero(hamming <= cut).tolist()
        got = index.nearest(q, 10)
        exact = mat.astype(np.float32) @ q  # the int8 copies are within ~1% of it
        sims = [s for _, s in got]
        assert sims == sorted(sims, reverse=True)
        assert all(abs(exact[i - 1] - s) < 0.03 for i, s in got)
        best = int(pos[np.argmax(exact[pos])]) + 1
        assert best in [i for i, _ in got[:3]]


def test_the_sampled_cut_off_is_the_exact_one() -> None:
    """Clustered data (a few distances shared by many rows) and smooth data: the estimated
    cut-off never takes more or fewer rows than the exact histogram (a too-high estimate once
    made a query rescore a third of a million rows)."""
    from hermes_core.plugins.memory.session_archive.vector_index import _cut

    rng = np.random.default_rng(3)
    spiky = rng.choice(np.array([40, 41, 90, 91, 92, 150], dtype=np.uint16), 200_000,
                       p=[0.001, 0.002, 0.3, 0.3, 0.297, 0.1])
    smooth = rng.integers(100, 260, 200_000).astype(np.uint16)
    for dist in (spiky, smooth):
        for count in (100, 400, 1000, 3000):
            exact = np.cumsum(np.bincount(dist, minlength=385))
            want = np.flatnonzero(dist <= int(np.searchsorted(exact, count)))
            assert np.array_equal(_cut(dist, count, 384), want)
