"""Hybrid search in the archive, with real SQLite files: the background indexer, the fusion and
which path found each hit, and the bad inputs of issue 19 (no embedder, an embedder that raises,
hangs or returns the wrong dimension, a model switch, 10k-character and emoji-only queries):
word search keeps working, a clear message says what semantic search lacks, nothing is lost.

The archive fixture runs each test on both backends: a SQLite file and a real PostgreSQL
database (the conftest's throwaway server).

Most tests use a tiny deterministic embedder (a synonym table) so they test the plumbing, not a
model; one test runs the real all-MiniLM-L6-v2 when it is installed."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from archive_support import make_archive  # noqa: E402

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder  # noqa: E402
from hermes_core.kinds import Embedder  # noqa: E402
from hermes_core.plugins.memory.session_archive import QueryError, SessionArchive  # noqa: E402
from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search  # noqa: E402
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex  # noqa: E402
from hermes_core.plugins.memory.session_archive.vectors import (  # noqa: E402
    VectorIndexer,
    reindex,
    state,
)
from hermes_core.types import Message, Session  # noqa: E402

TOPICS = {"dog": 0, "whippet": 0, "pet": 0, "puppy": 0, "rent": 1, "flat": 1, "landlord": 1,
          "cost": 1, "editor": 2, "helix": 2, "neovim": 2, "coding": 2, "🐶": 0}


class Synonyms(Embedder):
    """Each text -> the normalised counts of the topics its words belong to (plus a little of
    everything, so no vector is zero)."""

    name = "synonyms"
    dimension = 4
    model_id = "synonyms-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            v = [0.05] * 4
            for word in t.lower().replace("?", " ").replace(",", " ").split():
                if word in TOPICS:
                    v[TOPICS[word]] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out


class SynonymsV2(Synonyms):
    model_id = "synonyms-v2"


class Broken(Synonyms):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("model file unreadable")


def fill(a: SessionArchive) -> None:
    t = 1_700_000_000.0
    for sid, text, when in [
        ("s-dog", "We adopted a whippet from the shelter last week", t),
        ("s-rent", "The landlord raises it to 1,450 from October", t + 100),
        ("s-editor-old", "I moved to Helix for all my coding", t + 200),
        ("s-editor-new", "Back in Neovim for coding, Helix lacked plugins", t + 30 * 86400),
        ("s-other", "The weather was grey all weekend", t + 400),
    ]:
        a.open_session(Session(id=sid, started_at=when))
        a.append_messages(sid, [Message("user", text, timestamp=when),
                                Message("assistant", "noted", timestamp=when + 1)])


@pytest.fixture()
def archive(tmp_path: Path, storage_url: str | None):
    """The filled archive on each backend in turn (SQLite file, then a real PostgreSQL)."""
    a = make_archive(tmp_path, storage_url)
    fill(a)
    yield a
    a.close()


def semantic(a: SessionArchive, embedder: Embedder, **kw: float) -> Semantic:
    g = GuardedEmbedder(embedder, **kw)
    reindex(a, g)
    return Semantic(embedder=g, index=VectorIndex(a))


def top(out: dict[str, object]) -> list[str]:
    return [r["session_id"] for r in out["results"]]  # type: ignore[index, union-attr]


def test_a_paraphrase_is_found_by_meaning_and_says_so(archive: SessionArchive) -> None:
    assert session_search(archive, "what pet did we get")["count"] == 0  # no shared word
    out = session_search(archive, "what pet did we get", semantic=semantic(archive, Synonyms(None, None)))
    assert top(out)[0] == "s-dog" and out["semantic"] == "on"
    hit = out["results"][0]["hits"][0]
    assert hit["found_by"] == "meaning"


def test_with_a_user_scope_meaning_finds_only_that_users_sessions(archive: SessionArchive) -> None:
    """memory.scope: user: both paths see only the asking user's sessions (the fixture's
    sessions have no user key: they belong to the "" user)."""
    t = 1_700_100_000.0
    for sid, user, text in [("s-alice", "alice", "Alice adopted a whippet from the shelter"),
                            ("s-bob", "bob", "Bob brought home a puppy on Sunday")]:
        archive.open_session(Session(id=sid, started_at=t, attributes={"user_id": user}))
        archive.append_messages(sid, [Message("user", text, timestamp=t),
                                      Message("assistant", "noted", timestamp=t + 1)])
    sem = semantic(archive, Synonyms(None, None))
    for user, want in (("alice", "s-alice"), ("bob", "s-bob"), ("", "s-dog")):
        out = session_search(archive, "what pet did we get", semantic=sem, user=user)
        assert out["semantic"] == "on" and top(out)[0] == want, (user, top(out))
        assert out["results"][0]["hits"][0]["found_by"] == "meaning"
        others = {"s-alice", "s-bob"} - {want}
        assert not others & set(top(out)), (user, top(out))
    assert top(session_search(archive, "what pet did we get", semantic=sem, user="alice")) == [
        "s-alice"]
    # nobody's sessions: nothing, by words or by meaning
    assert session_search(archive, "what pet did we get", semantic=sem, user="carol")["count"] == 0


def test_an_exact_word_match_still_wins_and_is_labelled(archive: SessionArchive) -> None:
    out = session_search(archive, "whippet shelter", semantic=semantic(archive, Synonyms(None, None)))
    assert top(out)[0] == "s-dog"
    assert out["results"][0]["hits"][0]["found_by"] == "words+meaning"


def test_the_later_statement_of_a_fact_is_shown_with_the_earlier(archive: SessionArchive) -> None:
    out = session_search(archive, "which editor do I use for coding?",
                         semantic=semantic(archive, Synonyms(None, None)))
    listed = {r["session_id"]: r for r in out["results"]}
    assert {"s-editor-new", "s-editor-old"} <= set(listed)
    # by relevance the earlier statement leads here; the later one is named beside it
    assert top(out)[:2] == ["s-editor-old", "s-editor-new"]
    assert listed["s-editor-old"]["newer"]["session_id"] == "s-editor-new"


def test_the_background_indexer_fills_vectors_without_the_turn(archive: SessionArchive) -> None:
    g = GuardedEmbedder(Synonyms(None, None))
    indexer = VectorIndexer(archive, g, batch=2)
    try:
        indexer.wake()
        assert indexer.idle.wait(30)
        assert state(archive, g).count == 10  # 5 user + 5 assistant messages
        archive.append_message("s-new", Message("user", "a puppy video"))
        indexer.wake()
        assert indexer.idle.wait(30)
        assert state(archive, g).count == 11
    finally:
        indexer.close()


def test_no_embedder_is_word_search_unchanged_with_a_reason(archive: SessionArchive) -> None:
    plain = session_search(archive, "whippet")
    off = session_search(archive, "whippet", semantic=Semantic(problem="semantic search is off"))
    assert top(off) == top(plain) == ["s-dog"]
    assert off["semantic"] == "semantic search is off" and "semantic" not in plain


def test_a_raising_embedder_leaves_word_search_working(archive: SessionArchive) -> None:
    g = GuardedEmbedder(Broken(None, None))
    sem = Semantic(embedder=g, index=VectorIndex(archive))
    out = session_search(archive, "whippet", semantic=sem)
    assert top(out) == ["s-dog"]
    assert "model file unreadable" in out["semantic"] and "word search still works" in out["semantic"]
    # the indexer keeps its cursor: nothing is skipped, nothing lost
    with pytest.raises(Exception, match=r"model file unreadable|paused"):
        reindex(archive, g)
    assert state(archive, None).through == 0 and archive.count_messages() == 10


def test_a_hanging_embedder_is_bounded(archive: SessionArchive) -> None:
    release = threading.Event()

    class Hanging(Synonyms):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            release.wait(30)
            return super().embed(texts)

    g = GuardedEmbedder(Hanging(None, None), timeout=0.2)
    try:
        out = session_search(archive, "whippet", semantic=Semantic(embedder=g,
                                                                   index=VectorIndex(archive)))
        assert top(out) == ["s-dog"] and "did not answer within 0.2 s" in out["semantic"]
    finally:
        release.set()
        g.close()


def test_nan_query_vectors_do_not_reach_the_ranking(archive: SessionArchive) -> None:
    """An embedder that starts returning NaN (vectors stored before were fine): the search says
    semantic search lacks a working embedder and ranks by words, instead of "on" with NaN
    scores; the indexer is paused rather than retrying at once; nothing stored is lost."""
    sem = semantic(archive, Synonyms(None, None))

    class NaNs(Synonyms):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[float("nan")] * 4 for _ in texts]

    g = GuardedEmbedder(NaNs(None, None), pause=3600)
    try:
        out = session_search(archive, "whippet", semantic=Semantic(embedder=g, index=sem.index))
        assert top(out) == ["s-dog"] and "NaN" in out["semantic"]
        assert "word search still works" in out["semantic"] and not g.ready()
        assert state(archive, g).count == 10 and archive.count_messages() == 10
    finally:
        g.close()


def test_switching_models_says_reindex_is_required(archive: SessionArchive) -> None:
    semantic(archive, Synonyms(None, None))
    g2 = GuardedEmbedder(SynonymsV2(None, None))
    out = session_search(archive, "whippet", semantic=Semantic(embedder=g2,
                                                               index=VectorIndex(archive)))
    assert top(out) == ["s-dog"] and "hermes-core sessions reindex" in out["semantic"]
    assert "synonyms-v1" in out["semantic"]
    reindex(archive, g2)  # rebuilds: the old vectors are dropped, every message embedded again
    st = state(archive, g2)
    assert st.problem is None and st.model == "synonyms-v2" and st.count == 10


def test_emoji_only_and_huge_queries(archive: SessionArchive) -> None:
    with pytest.raises(QueryError, match="no letters or digits"):
        session_search(archive, "🐶🐶")
    sem = semantic(archive, Synonyms(None, None))
    out = session_search(archive, "🐶 🐶", semantic=sem)  # meaning only
    assert top(out)[0] == "s-dog" and out["matched"].startswith("by meaning only")
    huge = "whippet " * 1500  # 10.5k characters
    with pytest.raises(QueryError, match="limit is 2,000"):
        session_search(archive, huge)
    assert top(session_search(archive, huge, semantic=sem))[0] == "s-dog"


def test_excluded_words_hold_on_both_backends_by_words(archive: SessionArchive) -> None:
    """-word leaves out the messages holding the word on PostgreSQL too (it was ignored there:
    "whippet -shelter" returned the whippet message)."""
    assert top(session_search(archive, "whippet")) == ["s-dog"]
    out = session_search(archive, "whippet -shelter")
    assert top(out) == [] and out["count"] == 0
    assert top(session_search(archive, "whippet -grey")) == ["s-dog"]
    assert top(session_search(archive, "whippet AND NOT shelter")) == []


def test_excluded_words_hold_for_what_meaning_finds(archive: SessionArchive) -> None:
    """A message found by meaning alone is left out when it holds a word the query excludes
    (-word, NOT word), and a query that only excludes is refused, not searched by the meaning
    of the excluded word."""
    sem = semantic(archive, Synonyms(None, None))
    assert top(session_search(archive, "puppy", semantic=sem))[0] == "s-dog"  # by meaning
    for q in ("puppy -shelter", "puppy AND NOT shelter", "puppy NOT (shelter OR grey)"):
        assert "s-dog" not in top(session_search(archive, q, semantic=sem)), q
    assert top(session_search(archive, "puppy -grey", semantic=sem))[0] == "s-dog"
    with pytest.raises(QueryError, match="only excludes"):
        session_search(archive, "-whippet", semantic=sem)


def test_a_query_only_meaning_could_search_says_why_it_cannot(archive: SessionArchive) -> None:
    """Emoji only, vectors of another model: the refusal names the reindex command, not only
    "no letters or digits"."""
    semantic(archive, Synonyms(None, None))
    g2 = GuardedEmbedder(SynonymsV2(None, None))
    with pytest.raises(QueryError, match=r"no letters or digits.*hermes-core sessions reindex"):
        session_search(archive, "🐶🐶", semantic=Semantic(embedder=g2, index=VectorIndex(archive)))


def test_reindex_progress_counts_messages_stored_meanwhile(archive: SessionArchive) -> None:
    """`sessions reindex` while a turn stores messages: the progress total grows with them
    (it stood still, and the bar sat at 100% while hundreds more were embedded), every message
    gets one vector, none twice."""
    g = GuardedEmbedder(Synonyms(None, None))
    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        if len(calls) == 1:  # a turn stores messages while the reindex runs
            archive.append_messages("s-late", [Message("user", f"a late whippet note {i}")
                                               for i in range(7)])

    assert reindex(archive, g, batch=4, progress=progress) == 17
    assert all(done <= total for done, total in calls) and calls[-1] == (17, 17)
    st = state(archive, g)
    assert st.count == 17 and archive.count_messages() == 17


def test_a_rebuild_with_a_broken_embedder_keeps_the_old_vectors(archive: SessionArchive) -> None:
    """`sessions reindex --rebuild` (or a model switch) with an embedder that fails: the old
    vectors stay (they were dropped before the first batch failed, leaving none), and the
    error says so."""
    semantic(archive, Synonyms(None, None))
    assert state(archive, None).count == 10

    class BrokenV2(Broken):
        model_id = "synonyms-v2"

    for broken, rebuild in ((Broken(None, None), True), (BrokenV2(None, None), False)):
        g = GuardedEmbedder(broken)
        with pytest.raises(EmbeddingError, match="model file unreadable"):
            reindex(archive, g, rebuild=rebuild)
        st = state(archive, None)
        assert st.count == 10 and st.model == "synonyms-v1"


def test_deleting_a_message_deletes_its_vector(archive: SessionArchive) -> None:
    g = GuardedEmbedder(Synonyms(None, None))
    reindex(archive, g)
    archive.db.write(lambda con: con.execute("DELETE FROM messages WHERE session = "
                                             "(SELECT num FROM sessions WHERE id = 's-dog')"))
    assert state(archive, g).count == 8


def test_the_real_model_finds_a_paraphrase(tmp_path: Path, storage_url: str | None) -> None:
    minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    with make_archive(tmp_path, storage_url) as a:
        a.append_messages("dog", [Message("user", "We adopted a three-year-old whippet called "
                                                  "Pepper from the shelter.")])
        a.append_messages("db", [Message("user", "We are moving billing off MySQL onto "
                                                 "PostgreSQL next quarter.")])
        a.append_messages("trip", [Message("user", "Booked flights to Lisbon for May.")])
        g = GuardedEmbedder(minilm.MiniLMEmbedder(minilm.MiniLMConfig()), timeout=120)
        sem = semantic(a, minilm.MiniLMEmbedder(minilm.MiniLMConfig()), timeout=120)
        out = session_search(a, "What kind of animal did we bring home?", semantic=sem)
        assert top(out)[0] == "dog"
        g.close()


def test_the_provider_indexes_in_the_background_and_searches_by_meaning(tmp_path: Path) -> None:
    import logging

    from hermes_core.config import CoreConfig
    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.memory.session_archive import (
        SessionArchiveConfig,
        SessionArchiveProvider,
    )

    g = GuardedEmbedder(Synonyms(None, None))
    context = PluginContext(plugin_name="session_archive", home=tmp_path, config=CoreConfig(),
                            logger=logging.getLogger("test"), embedder=lambda: g)
    provider = SessionArchiveProvider(SessionArchiveConfig(), context)
    try:
        provider.on_message(Message("user", "we adopted a whippet"), Session(id="old"))
        provider.on_message(Message("user", "grey weather today"), Session(id="other"))
        indexer = provider._indexer
        assert indexer is not None and indexer.idle.wait(30)
        out = session_search(provider.archive, "my pet", current_session_id="now",
                             **provider._search_settings())
        assert top(out)[0] == "old" and out["semantic"] == "on"
    finally:
        provider.shutdown()


def test_the_provider_without_an_embedder_says_semantic_search_is_off(tmp_path: Path) -> None:
    import logging

    from hermes_core.config import CoreConfig
    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.memory.session_archive import (
        SessionArchiveConfig,
        SessionArchiveProvider,
    )

    context = PluginContext(plugin_name="session_archive", home=tmp_path, config=CoreConfig(),
                            logger=logging.getLogger("test"))
    provider = SessionArchiveProvider(SessionArchiveConfig(), context)
    try:
        provider.on_message(Message("user", "we adopted a whippet"), Session(id="old"))
        out = session_search(provider.archive, "whippet", **provider._search_settings())
        assert top(out) == ["old"] and out["semantic"].startswith("semantic search is off")
    finally:
        provider.shutdown()


def test_an_embedder_named_but_unable_to_run_is_named_in_the_result(tmp_path: Path) -> None:
    """embeddings.embedder: minilm chosen explicitly, its package missing: the result said only
    "no embedder"; it names the choice and where to read why."""
    import logging

    from hermes_core.config import CoreConfig
    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.memory.session_archive import (
        SessionArchiveConfig,
        SessionArchiveProvider,
    )

    core = CoreConfig.model_validate({"embeddings": {"embedder": "minilm"}})
    context = PluginContext(plugin_name="session_archive", home=tmp_path, config=core,
                            logger=logging.getLogger("test"), embedder=lambda: None)
    provider = SessionArchiveProvider(SessionArchiveConfig(), context)
    try:
        provider.on_message(Message("user", "we adopted a whippet"), Session(id="old"))
        out = session_search(provider.archive, "whippet", **provider._search_settings())
        assert top(out) == ["old"]
        assert "embeddings.embedder 'minilm' cannot run" in out["semantic"]
        assert "hermes-core doctor" in out["semantic"]
    finally:
        provider.shutdown()


def test_the_archive_passes_the_paraphrase_check_with_the_local_model(
        tmp_path: Path, storage_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from hermes_core.config import CoreConfig
    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.memory.session_archive import (
        SessionArchiveConfig,
        SessionArchiveProvider,
    )
    from hermes_core.testing.paraphrase import check_paraphrase_recall

    minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    if storage_url is not None:  # the provider's archive in that PostgreSQL database
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    g = GuardedEmbedder(minilm.MiniLMEmbedder(minilm.MiniLMConfig()), timeout=120)
    context = PluginContext(plugin_name="session_archive", home=tmp_path, config=CoreConfig(),
                            logger=logging.getLogger("test"), embedder=lambda: g)
    provider = SessionArchiveProvider(SessionArchiveConfig(), context)
    assert getattr(provider.archive, "backend", "sqlite") == (
        "postgresql" if storage_url else "sqlite")
    from hermes_core.testing.conformance import CheckedHooks

    hooks = CheckedHooks(provider, "memory-provider")

    def settle() -> None:
        assert provider._indexer is not None and provider._indexer.idle.wait(120)

    try:
        check_paraphrase_recall(hooks, settle=settle, tool="session_search")
        # and without an embedder the same check fails: words alone do not find paraphrases
        monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
        plain = SessionArchiveProvider(SessionArchiveConfig(path=str(tmp_path / "plain.db")),
                                       PluginContext(plugin_name="session_archive",
                                                     home=tmp_path, config=CoreConfig(),
                                                     logger=logging.getLogger("test")))
        with pytest.raises(AssertionError, match="did not recall"):
            check_paraphrase_recall(CheckedHooks(plain, "memory-provider"), tool="session_search")
        plain.shutdown()
    finally:
        provider.shutdown()
