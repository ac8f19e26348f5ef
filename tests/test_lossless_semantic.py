"""Hybrid search in the lossless engine's archive, on both backends (the ``storage_url``
fixture: context.db, a real SQLite file, then a real PostgreSQL database): vectors filled in the
background after a compaction, words and meaning fused, which path found each hit, and the
fallbacks (no embedder, one that raises, hangs or returns the wrong size, a model switch).
PostgreSQL-only: two nodes on one database share vectors and may write the same ones at once;
``storage migrate`` says the vectors will be rebuilt, and they are.

A tiny deterministic embedder defined here (a synonym table) tests the plumbing; one test runs
the real all-MiniLM-L6-v2 when its weights are installed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from compressor_support import build_history
from embedder_support import TopicEmbedder

from hermes_core.config import CoreConfig, LLMSection
from hermes_core.embeddings import GuardedEmbedder
from hermes_core.kinds import Embedder, PluginContext
from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine, SpanStore
from hermes_core.plugins.context_engine.lossless.records import Span
from hermes_core.types import Message, ToolContext

TOPICS = {"dog": 0, "whippet": 0, "pet": 0, "animal": 0, "rent": 1, "landlord": 1,
          "editor": 2, "helix": 2, "neovim": 2, "coding": 2}


class Synonyms(TopicEmbedder):
    topics = TOPICS


class SynonymsV2(Synonyms):
    model_id = "synonyms-v2"


class Broken(Synonyms):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("model file unreadable")


class WrongSize(Synonyms):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class Hangs(Synonyms):
    def __init__(self) -> None:
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.release.wait(30)
        return super().embed(texts)


PLANTED = [
    Message("user", "We adopted a whippet from the shelter last week"),
    Message("assistant", "Congratulations on the new family member."),
    Message("user", "I moved to Helix for coding"),
    Message("assistant", "Helix has good defaults."),
    Message("user", "Actually I still prefer Neovim keybindings"),
    Message("assistant", "Neovim it is."),
]


@pytest.fixture(autouse=True)
def backend(storage_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Every test runs once per backend: the engine picks PostgreSQL from the environment."""
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    else:
        monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    return storage_url


def vector_rows(engine: LosslessEngine) -> list[tuple[int, str, int]]:
    """(message id, model, bytes) of every stored vector, read from the backend itself."""
    if isinstance(engine.store, SpanStore):
        db = sqlite3.connect(engine.store.path)
        try:
            return db.execute("SELECT message_id, model, length(vec) FROM span_vectors").fetchall()
        finally:
            db.close()
    return [(int(a), str(b), int(c)) for a, b, c in engine.store.db.fetch(
        "SELECT message_id, model, length(vec) FROM lossless_span_vectors")]


def message_ids(engine: LosslessEngine) -> set[int]:
    if isinstance(engine.store, SpanStore):
        db = sqlite3.connect(engine.store.path)
        try:
            return {r[0] for r in db.execute("SELECT id FROM span_messages")}
        finally:
            db.close()
    return {int(r[0]) for r in engine.store.db.fetch("SELECT id FROM lossless_span_messages")}


def make(home: Path, embedder: Embedder | None, *, timeout: float = 30.0, window: int = 60_000,
         **settings: Any) -> LosslessEngine:
    guarded = GuardedEmbedder(embedder, timeout=timeout) if embedder is not None else None
    context = PluginContext(plugin_name="test", home=home,
                            config=CoreConfig(llm=LLMSection(context_window=window)),
                            logger=logging.getLogger("test.lossless"), embedder=lambda: guarded)
    return LosslessEngine(LosslessConfig(**settings), context)


def compacted(home: Path, embedder: Embedder | None, *, turns: tuple[int, int] = (60, 80),
              max_tools: int = 3, **kw: Any) -> LosslessEngine:
    engine = make(home, embedder, **kw)
    before, after = turns
    result = engine.compact(build_history(before, seed=31, max_tools=max_tools) + PLANTED
                            + build_history(after, seed=32, max_tools=max_tools))
    assert all(m not in result.messages for m in PLANTED)  # archived, not kept live
    vec = engine.vectors()
    if vec is not None:
        assert vec.settle(600), "the vector indexer did not finish"
    return engine


def search(engine: LosslessEngine, query: str, **args: Any) -> dict[str, Any]:
    tool = {t.name: t for t in engine.get_tools()}["context_search"]
    out = tool.invoke({"query": query, **args}, ToolContext())
    return json.loads(out) if isinstance(out, str) else out


def texts(engine: LosslessEngine, result: dict[str, Any]) -> list[str]:
    out = []
    for hit in result["hits"]:
        (row,) = engine.store.messages(hit["span_id"], hit["seq"], 1)
        out.append(row.message.content)
    return out


def test_a_paraphrase_is_found_by_meaning(tmp_path: Path) -> None:
    engine = compacted(tmp_path, Synonyms())
    found = search(engine, "which animal lives with us?")
    assert found["semantic"] == "on"
    assert texts(engine, found)[0] == PLANTED[0].content
    assert found["hits"][0]["found_by"] == "meaning"


def test_an_exact_word_ranks_first(tmp_path: Path) -> None:
    engine = compacted(tmp_path, Synonyms())
    found = search(engine, "neovim")
    first = texts(engine, found)[:2]
    assert "Neovim" in first[0] and found["hits"][0]["found_by"] == "words+meaning"
    assert any("Helix" in t for t in texts(engine, found))  # same topic, found by meaning
    vias = {h["found_by"] for h in found["hits"]}
    assert "meaning" in vias


def test_vectors_sit_beside_the_text_one_per_message(tmp_path: Path) -> None:
    engine = compacted(tmp_path, Synonyms())
    rows = vector_rows(engine)
    assert {r[0] for r in rows} == message_ids(engine) and len(rows) == len(message_ids(engine))
    assert {r[1] for r in rows} == {"synonyms-v1"}
    assert {r[2] for r in rows} <= {0, 12 * 2}  # float16: 2 bytes per dimension
    assert engine.vectors().pending() == 0


def rewrite_vectors(engine: LosslessEngine, fn: Any) -> None:
    """Replace every stored vector ``blob`` with ``fn(blob)``, in the backend itself."""
    if isinstance(engine.store, SpanStore):
        db = sqlite3.connect(engine.store.path)
        try:
            for mid, blob in db.execute("SELECT message_id, vec FROM span_vectors").fetchall():
                db.execute("UPDATE span_vectors SET vec = ? WHERE message_id = ?", (fn(blob), mid))
            db.commit()
        finally:
            db.close()
        return
    store = engine.store
    for mid, blob in store.db.fetch("SELECT message_id, vec FROM lossless_span_vectors"):
        store.db.execute("UPDATE lossless_span_vectors SET vec = ? WHERE message_id = ?",
                         (fn(bytes(blob)), mid))


def test_an_earlier_releases_float32_vectors_are_read_as_they_are(tmp_path: Path) -> None:
    import numpy as np

    engine = compacted(tmp_path, Synonyms())
    before = search(engine, "which animal lives with us?")
    # what 0.1 wrote: float32, 4 bytes per dimension, the same model id
    rewrite_vectors(engine, lambda b: np.frombuffer(b, dtype="<f2").astype("<f4").tobytes()
                    if b else b)
    assert {r[2] for r in vector_rows(engine)} <= {0, 12 * 4}
    after = search(engine, "which animal lives with us?")
    assert after["note"] is None and engine.vectors().pending() == 0  # nothing to redo
    assert [(h["span_id"], h["seq"], h["found_by"]) for h in after["hits"]] == [
        (h["span_id"], h["seq"], h["found_by"]) for h in before["hits"]]
    assert texts(engine, after)[0] == PLANTED[0].content
    # a row of any other size (damaged) is left out of the meaning side, never an error
    rewrite_vectors(engine, lambda b: b[:-2] if b else b)
    damaged = search(engine, "which animal lives with us?")
    assert {h["found_by"] for h in damaged["hits"]} <= {"words"}


def test_a_model_switch_recomputes_and_never_mixes(tmp_path: Path) -> None:
    old = compacted(tmp_path, Synonyms())
    old.shutdown()
    engine = make(tmp_path, SynonymsV2())
    engine.conversation = old.conversation  # the same conversation, served by a new process
    vec = engine.vectors()
    assert vec is not None and vec.pending() > 0  # the old model's vectors do not count
    found = search(engine, "which animal lives with us?")  # wakes the indexer
    assert "no vector yet" in (found["note"] or "")
    assert vec.settle(600)
    assert vec.pending() == 0
    assert {r[1] for r in vector_rows(engine)} == {"synonyms-v2"}
    assert texts(engine, search(engine, "which animal lives with us?"))[0] == PLANTED[0].content


@pytest.mark.parametrize("embedder, expect", [
    (None, "no embedder"),
    (Broken(), "raised RuntimeError: model file unreadable"),
    (WrongSize(), "2 dimensions"),
])
def test_without_meaning_the_word_search_is_unchanged(
        tmp_path: Path, embedder: Embedder | None, expect: str) -> None:
    engine = compacted(tmp_path, embedder)
    conversation = engine.conversation
    for query in ("whippet shelter", "Helix coding?", "which animal lives with us?"):
        found = search(engine, query)
        assert expect in found["semantic"]
        lexical = engine.store.search(conversation, query, limit=8)
        assert [(h["span_id"], h["seq"], h["snippet"]) for h in found["hits"]] == [
            (h.span_id, h.seq, h.snippet) for h in lexical]
        assert {h["found_by"] for h in found["hits"]} <= {"words"}


def test_a_hanging_embedder_leaves_word_search_working(tmp_path: Path) -> None:
    emb = Hangs()
    try:
        engine = compacted(tmp_path, emb, timeout=0.5)  # settle: the batch gives up at 0.5 s
        found = search(engine, "whippet")
        assert "did not answer within 0.5 s" in found["semantic"]
        assert "whippet" in texts(engine, found)[0]
    finally:
        emb.release.set()


def test_switched_off_by_config(tmp_path: Path, backend: str | None) -> None:
    engine = compacted(tmp_path, Synonyms(), semantic=False)
    assert engine.vectors() is None
    found = search(engine, "which animal lives with us?")
    assert "lossless.semantic: false" in found["semantic"]
    assert {h["found_by"] for h in found["hits"]} <= {"words"}
    if backend is None:
        assert not sqlite3.connect(tmp_path / "context.db").execute(
            "SELECT name FROM sqlite_master WHERE name = 'span_vectors'").fetchall()
    else:
        assert vector_rows(engine) == []


def test_forget_removes_the_vectors_too(tmp_path: Path) -> None:
    engine = compacted(tmp_path, Synonyms())
    before = len(vector_rows(engine))
    report = engine.forget(subject="whippet", scope="all", dry_run=False)
    assert report.deleted >= 1
    after = vector_rows(engine)
    assert len(after) == before - 1
    assert {r[0] for r in after} == message_ids(engine)  # none left behind
    found = search(engine, "which animal lives with us?")
    assert all("whippet" not in t for t in texts(engine, found))


def test_real_model_finds_a_paraphrase(tmp_path: Path) -> None:
    mod = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if mod.MiniLMEmbedder.unavailable():
        pytest.skip(mod.MiniLMEmbedder.unavailable())
    engine = compacted(tmp_path, mod.MiniLMEmbedder(mod.MiniLMConfig()), timeout=120,
                       window=2_000, turns=(8, 12), max_tools=0)
    found = search(engine, "What kind of pet did we bring home recently?")
    assert found["semantic"] == "on"
    assert PLANTED[0].content in texts(engine, found)[:3]
    exact = search(engine, "Neovim keybindings")
    assert texts(engine, exact)[0] == PLANTED[4].content
    assert exact["hits"][0]["found_by"] == "words+meaning"


def test_two_nodes_on_one_database_share_the_vectors(tmp_path: Path, backend: str | None) -> None:
    if backend is None:
        pytest.skip("nodes share an archive only through storage.url")
    first = compacted(tmp_path / "a", Synonyms())
    emb = Synonyms()
    second = make(tmp_path / "b", emb)  # another home: only the database is shared
    second.conversation = first.conversation
    vec = second.vectors()
    assert vec is not None and vec.pending() == 0  # the first node's vectors count here
    found = search(second, "which animal lives with us?")
    assert found["semantic"] == "on" and found["note"] is None
    assert texts(second, found)[0] == PLANTED[0].content
    assert found["hits"][0]["found_by"] == "meaning"
    assert emb.calls == 1  # the query only: nothing was embedded again


def test_the_same_vectors_written_by_two_nodes_at_once(tmp_path: Path) -> None:
    """Both nodes read the same messages without a vector, a forget runs, then both write: no
    error, one vector per archived message, none for the forgotten one."""
    from hermes_core.plugins.context_engine.lossless.vectors import _message_text
    from hermes_core.semantic import text_key
    from hermes_core.storage.vectors import encode

    old = compacted(tmp_path / "a", Synonyms())
    nodes = [make(tmp_path / "a", SynonymsV2()), make(tmp_path / "a", SynonymsV2())]
    storages = []
    for node in nodes:
        node.conversation = old.conversation
        vec = node.vectors()
        assert vec is not None
        storages.append(vec.storage)
    read = [s.unembedded("synonyms-v2", 100_000) for s in storages]
    assert read[0] == read[1] and len(read[0]) == len(message_ids(old))
    assert nodes[0].forget(subject="whippet", scope="all", dry_run=False).deleted >= 1
    model = SynonymsV2()
    for storage, rows in zip(storages, read, strict=True):
        texts_ = [_message_text(c, t) for _i, c, t in rows]
        vectors = model.embed(texts_)
        storage.put("synonyms-v2", [(mid, text_key(t), blob)
                                    for (mid, _c, _t), t, blob in zip(
                                        rows, texts_, encode(vectors, model.dimension),
                                        strict=True)])
    stored = vector_rows(old)
    assert {r[0] for r in stored} == message_ids(old)  # the forgotten message got none back
    assert {r[1] for r in stored} == {"synonyms-v2"}
    assert nodes[1].vectors().pending() == 0  # type: ignore[union-attr]
    found = search(nodes[1], "which animal lives with us?")
    assert all("whippet" not in t for t in texts(nodes[1], found))


class Counting(Synonyms):
    """Synonyms that count the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().embed(texts)


def test_storage_migrate_copies_the_vectors_nothing_is_embedded_again(
        tmp_path: Path, backend: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both directions: the vectors travel with their messages (by span and position, each
    with its model), so the target's engine has nothing pending and finds by meaning at once,
    embedding only its queries; a span given a new id on the way takes its vectors along."""
    if backend is None:
        pytest.skip("a migration needs the database")
    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.plugins.context_engine.lossless.transfer import copy_lossless
    from hermes_core.storage import parse_storage_url

    monkeypatch.delenv("HERMES_CORE_STORAGE_URL")
    files = compacted(tmp_path, Synonyms())
    assert isinstance(files.store, SpanStore)
    vectors = vector_rows(files)
    database = PgSpanStore(parse_storage_url(backend))
    # a span of another conversation holds the first span's id: that span is renumbered
    first = files.store.spans(files.conversation)[0]
    database.insert_spans([(Span(first.id, "someone-else", 0.0, None, None, 1, ""),
                            [Message("user", "an unrelated note")])])
    out = copy_lossless(files.store, database)
    assert out.renumbered == 1
    assert out.vectors == out.vectors_copied == len(vectors) > 0
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", backend)
    counting = Counting()
    node = make(tmp_path / "node", counting)
    node.conversation = files.conversation
    copied = vector_rows(node)
    assert sorted((m, n) for _i, m, n in copied) == sorted((m, n) for _i, m, n in vectors)
    assert node.vectors().pending() == 1  # type: ignore[union-attr]  # the unrelated note only
    found = search(node, "which animal lives with us?")
    assert texts(node, found)[0] == PLANTED[0].content
    assert found["hits"][0]["found_by"] == "meaning"
    assert found["note"] is None  # every message of this conversation has its vector
    assert counting.texts == 1  # the query; no copied message was embedded again
    # and back: the database's archive into a new context.db
    monkeypatch.delenv("HERMES_CORE_STORAGE_URL")
    back = SpanStore(tmp_path / "back" / "context.db")
    out = copy_lossless(database, back)
    assert out.vectors_copied == len(vectors) and out.conversations == 2
    counting = Counting()
    home = make(tmp_path / "back", counting)
    home.conversation = files.conversation
    assert home.vectors().pending() == 1  # type: ignore[union-attr]
    assert texts(home, search(home, "which animal lives with us?"))[0] == PLANTED[0].content
    assert counting.texts == 1


def test_copied_vectors_of_another_model_are_embedded_again(
        tmp_path: Path, backend: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if backend is None:
        pytest.skip("a migration needs the database")
    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.plugins.context_engine.lossless.transfer import copy_lossless
    from hermes_core.storage import parse_storage_url

    monkeypatch.delenv("HERMES_CORE_STORAGE_URL")
    files = compacted(tmp_path, Synonyms())
    out = copy_lossless(files.store, PgSpanStore(parse_storage_url(backend)))
    assert out.vectors_copied > 0
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", backend)
    node = make(tmp_path / "node", SynonymsV2())  # the target runs another model
    node.conversation = files.conversation
    vec = node.vectors()
    assert vec is not None and vec.pending() == out.vectors_copied  # never compared
    search(node, "which animal lives with us?")  # wakes the indexer
    assert vec.settle(600) and vec.pending() == 0
    assert {r[1] for r in vector_rows(node)} == {"synonyms-v2"}


def test_odd_queries_on_either_backend(tmp_path: Path) -> None:
    """Emoji only: nothing matches by words, meaning still answers; a 10k-character query is
    refused by the tool with the limit named, and the library search embeds only its start."""
    from hermes_core.errors import ToolError

    engine = compacted(tmp_path, Synonyms())
    emoji = search(engine, "\U0001f415\U0001f415\U0001f415")
    assert emoji["semantic"] == "on" and {h["found_by"] for h in emoji["hits"]} <= {"meaning"}
    with pytest.raises(ToolError, match="at most 1000 characters"):
        search(engine, "whippet " * 1_250)
    vec = engine.vectors()
    assert vec is not None
    result = vec.search(engine.conversation, "whippet " * 1_250, limit=3)
    assert result is not None
    hits, _note = result
    (row,) = engine.store.messages(hits[0].hit.span_id, hits[0].hit.seq, 1)
    assert row.message.content == PLANTED[0].content and hits[0].via == "words+meaning"


def test_a_schema_1_database_gains_vectors_and_keeps_its_spans(
        tmp_path: Path, backend: str | None) -> None:
    """An archive made before vectors existed (lossless schema 1) is migrated forward on open;
    its spans stay and are embedded by the indexer."""
    if backend is None:
        pytest.skip("PostgreSQL schema migrations")
    from hermes_core.plugins.context_engine.lossless import pg_store
    from hermes_core.storage import get_pool, parse_storage_url
    from hermes_core.storage.migrations import migrate, schema_versions

    url = parse_storage_url(backend)
    with get_pool(url).connection() as con:
        migrate(con, url, pg_store.COMPONENT, pg_store.MIGRATIONS[:1])
        (span_id,) = con.execute(
            "INSERT INTO lossless_spans(conversation, created_at, n_messages, digest) "
            "VALUES ('old', 0, 1, '') RETURNING id").fetchone()
        pg_store.insert_span_messages(con, int(span_id), [PLANTED[0]])
    engine = make(tmp_path, Synonyms())
    engine.conversation = "old"
    with get_pool(url).connection() as con:
        assert schema_versions(con)[pg_store.COMPONENT] == len(pg_store.MIGRATIONS)
    vec = engine.vectors()
    assert vec is not None and vec.pending() == 1
    vec.wake()
    assert vec.settle(600) and vec.pending() == 0
    found = search(engine, "which animal lives with us?")
    assert texts(engine, found) == [PLANTED[0].content]
    assert found["hits"][0]["found_by"] == "meaning"


def test_a_lone_surrogate_in_the_query_is_searched_not_refused(tmp_path: Path) -> None:
    """A lone UTF-16 surrogate (valid in a JSON tool call) was refused with pydantic's "unable
    to parse raw data as a unicode string"; it is read as a space, as session_search does."""
    engine = compacted(tmp_path, None)
    for query in ("whippet\ud800", "\udfffwhippet shelter"):
        found = search(engine, query)
        assert texts(engine, found)[0] == PLANTED[0].content


def test_a_forget_from_another_process_removes_the_vectors_too(tmp_path: Path) -> None:
    """``hermes-core forget`` starts the engine afresh: its semantic search never started, yet
    no vector of a forgotten message may stay behind (nor be handed to a message that takes its
    id: SQLite gives the largest id again)."""
    engine = compacted(tmp_path, Synonyms())
    fresh = make(tmp_path, Synonyms())  # the forget command's engine
    report = fresh.forget(subject="whippet", scope="all", dry_run=False)
    assert report.deleted >= 1
    assert {r[0] for r in vector_rows(engine)} == message_ids(engine)  # none left behind
    fresh.shutdown()
    engine.shutdown()
