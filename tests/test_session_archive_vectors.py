"""The archive's vector index (sign bits in memory, floats in SQLite), the embedder's two lanes,
the conversation-level fusion, settle() and the optional prefetch, on real SQLite files.

The embedders here are small deterministic classes (no model): they test the plumbing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from hermes_core.config import CoreConfig  # noqa: E402
from hermes_core.embeddings import EmbeddingError, GuardedEmbedder  # noqa: E402
from hermes_core.kinds import Embedder, PluginContext  # noqa: E402
from hermes_core.plugins.memory.session_archive import (  # noqa: E402
    SessionArchive,
    SessionArchiveConfig,
    SessionArchiveProvider,
    vector_index,
)
from hermes_core.plugins.memory.session_archive.hybrid import hybrid_candidates  # noqa: E402
from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search  # noqa: E402
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex  # noqa: E402
from hermes_core.plugins.memory.session_archive.vectors import (  # noqa: E402
    reindex,
)
from hermes_core.types import Message, Session  # noqa: E402

DIM = 64


def _unit(v: Any) -> Any:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


class Table(Embedder):
    """Vectors looked up by text (a test fills ``VECTORS``); unknown texts get a fixed vector."""

    name = "table"
    dimension = DIM
    model_id = "table-v1"
    VECTORS: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> list[Any]:
        other = _unit(np.ones(DIM, dtype=np.float32))
        return [self.VECTORS.get(t, other) for t in texts]


def store_vectors(a: SessionArchive, rows: list[tuple[int, Any]]) -> None:
    """Write vectors straight into the table (as the indexer would) and claim the model."""
    def tx(con: Any) -> None:
        con.executemany("INSERT OR REPLACE INTO message_vectors(id, vec) VALUES (?, ?)",
                        [(i, np.asarray(v, dtype=np.float16).tobytes()) for i, v in rows])
        for key, value in (("vectors_model", "table-v1"), ("vectors_dimension", str(DIM)),
                           ("vectors_through", str(max(i for i, _ in rows)))):
            con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    a.db.write(tx)


@pytest.mark.parametrize("in_memory", [True, False])
def test_the_sign_bit_scan_finds_the_exact_nearest_even_the_oldest(tmp_path: Path,
                                                                     monkeypatch: Any,
                                                                     in_memory: bool) -> None:
    rng = np.random.default_rng(3)
    centres = _unit(rng.standard_normal((20, DIM)).astype(np.float32))
    vecs = _unit(centres[rng.integers(0, 20, 3000)]
                 + 0.3 * rng.standard_normal((3000, DIM)).astype(np.float32))
    query = _unit(centres[5] + 0.1 * rng.standard_normal(DIM).astype(np.float32))
    vecs[0] = query  # the best match is the oldest message of all
    monkeypatch.setattr(vector_index, "LOAD_CHUNK", 700)  # the load reads in chunks
    monkeypatch.setattr(vector_index, "SCAN_BLOCK", 500)  # blocks, on two threads
    with SessionArchive(tmp_path / "state.db", background_checkpoints=False) as a:
        a.append_messages("s", [Message("user", f"message {i}") for i in range(3000)])
        ids = [r[0] for r in a.db.read("SELECT id FROM messages ORDER BY id")]
        store_vectors(a, list(zip(ids, vecs, strict=True)))
        index = VectorIndex(a, rescore=200, in_memory=in_memory)
        index.refresh(DIM)
        assert len(index) == 3000 and index.complete
        # bits, int8 copies and ids (or bits and ids only), never float32 rows
        assert index.memory_bytes() < 3000 * (130 if in_memory else 50)
        exact = np.argsort(-(vecs @ query))[:10]
        got = index.nearest(query, 10)
        assert got[0][0] == ids[0] and abs(got[0][1] - 1.0) < 1e-2
        assert len({i for i, _ in got} & {ids[k] for k in exact}) >= 9
        # the sign bits only pre-select: every returned score is the exact cosine
        for i, s in got:
            assert abs(s - float(vecs[ids.index(i)] @ query)) < 1e-2
        # exclusions are applied before the top k is cut
        rest = index.nearest(query, 10, exclude={ids[0]})
        assert ids[0] not in {i for i, _ in rest} and len(rest) == 10
        # new rows are read on the next refresh, appended in place
        a.append_messages("s", [Message("user", "newest")])
        new_id = a.db.read("SELECT max(id) FROM messages")[0][0]
        store_vectors(a, [(new_id, query)])
        index.refresh(DIM)
        assert len(index) == 3001 and {i for i, _ in index.nearest(query, 2)} == {ids[0], new_id}


def test_a_search_during_the_first_load_uses_what_is_loaded(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db", background_checkpoints=False) as a:
        a.append_messages("s", [Message("user", "one"), Message("user", "two")])
        store_vectors(a, [(1, _unit(np.ones(DIM))), (2, _unit(np.ones(DIM)))])
        index = VectorIndex(a)
        with index._lock:  # another thread is loading
            assert index.refresh(DIM, wait=False) is False
        assert index.refresh(DIM, wait=False) is True and len(index) == 2


class Gate(Embedder):
    """Blocks every call whose first text is "batch" until released."""

    name = "gate"
    dimension = DIM
    model_id = "gate-v1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[Any]:
        if texts and texts[0] == "batch":
            self.entered.set()
            self.release.wait(30)
        return [_unit(np.ones(DIM, dtype=np.float32))] * len(texts)


def test_a_query_does_not_wait_behind_an_indexing_batch() -> None:
    gate = Gate()
    g = GuardedEmbedder(gate, timeout=30)
    try:
        worker = threading.Thread(target=g.embed, args=(["batch"],), kwargs={"background": True})
        worker.start()
        assert gate.entered.wait(30)
        # before the lanes, this call failed with "still busy with a call that timed out" and
        # paused semantic search for a minute, although nothing had timed out
        assert len(g.embed(["a query"], timeout=10)) == 1 and g.problem is None
        gate.release.set()
        worker.join(30)
    finally:
        gate.release.set()
        g.close()


def test_a_timed_out_lane_fails_fast_until_its_call_ends() -> None:
    gate = Gate()
    g = GuardedEmbedder(gate, timeout=0.2, pause=0)
    try:
        with pytest.raises(EmbeddingError, match=r"did not answer within 0\.2 s"):
            g.embed(["batch"], background=True)
        with pytest.raises(EmbeddingError, match="still busy with a call that timed out"):
            g.embed(["next batch"], background=True)
        assert len(g.embed(["a query"])) == 1  # the query lane is free
        gate.release.set()
        g._stuck["background"].result(timeout=30)  # the stuck call has ended
        waiter = g.start(["batch after"], background=True, timeout=30)
        assert len(waiter()) == 1  # once the stuck call ended, the lane works again
    finally:
        gate.release.set()
        g.close()


def test_a_fact_spread_over_turns_outranks_one_incidental_match(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    topic = _unit(rng.standard_normal(DIM).astype(np.float32))
    noise = [_unit(rng.standard_normal(DIM).astype(np.float32)) for _ in range(4)]

    def mix(a: float, v: Any) -> Any:
        return _unit(a * topic + v)

    with SessionArchive(tmp_path / "state.db", background_checkpoints=False) as a:
        a.open_session(Session(id="spread", started_at=1_700_000_000))
        a.append_messages("spread", [Message("user", "my manager is Priya", timestamp=1_700_000_000),
                                     Message("assistant", "regular one-to-ones?",
                                             timestamp=1_700_000_001),
                                     Message("user", "every other Thursday",
                                             timestamp=1_700_000_002)])
        a.open_session(Session(id="single", started_at=1_700_000_000))
        a.append_messages("single", [Message("user", "cycling to the office",
                                             timestamp=1_700_000_000),
                                     Message("assistant", "nice", timestamp=1_700_000_001)])
        query = "how often do I meet my boss"
        Table.VECTORS = {query: topic}
        # each turn of "spread" is a little less similar than the one incidental match ...
        rows = [(1, mix(0.45, noise[0])), (2, mix(0.5, noise[1])), (3, mix(0.45, noise[2])),
                (4, mix(0.5, noise[3])), (5, _unit(-topic))]
        store_vectors(a, rows)
        sims = {i: float(_unit(v) @ topic) for i, v in rows}
        assert sims[4] > max(sims[1], sims[2], sims[3])
        g = GuardedEmbedder(Table(None, None))
        out = hybrid_candidates(a, query, g, VectorIndex(a), use_words=False)
        rows_sessions = dict(a.db.read("SELECT m.id, s.id FROM messages AS m JOIN sessions AS s "
                                       "ON s.num = m.session"))
        order = list(dict.fromkeys(rows_sessions[c.id] for c in out.found))
        # ... but together they make the better conversation
        assert order[0] == "spread", order
        g.close()


def provider_with(tmp_path: Path, embedder: Embedder | None, **config: Any
                  ) -> SessionArchiveProvider:
    g = GuardedEmbedder(embedder) if embedder is not None else None
    context = PluginContext(plugin_name="session_archive", home=tmp_path, config=CoreConfig(),
                            logger=logging.getLogger("test"), embedder=lambda: g)
    return SessionArchiveProvider(SessionArchiveConfig(**config), context)


class Topics(Embedder):
    """Pets vs. weather: enough meaning for a provider-level test."""

    name = "topics"
    dimension = 2
    model_id = "topics-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        pets = ("pet", "whippet", "dog", "puppy")
        return [[0.9, 0.1] if any(p in t.lower() for p in pets) else [0.1, 0.9] for t in texts]


def test_settle_waits_until_every_message_has_its_vector(tmp_path: Path) -> None:
    provider = provider_with(tmp_path, Topics(None, None))
    try:
        for k in range(40):
            provider.on_message(Message("user", f"the whippet, day {k}"), Session(id=f"s{k}"))
        assert provider.settle(60) is True
        assert provider.archive.db.read("SELECT count(*) FROM message_vectors")[0][0] == 40
        assert len(provider.semantic().index) == 40
    finally:
        provider.shutdown()


def test_settle_without_an_embedder_is_immediate(tmp_path: Path) -> None:
    provider = provider_with(tmp_path, None)
    try:
        provider.on_message(Message("user", "hello"), Session(id="s"))
        assert provider.settle(1) is True
    finally:
        provider.shutdown()


def test_prefetch_is_off_by_default(tmp_path: Path) -> None:
    provider = provider_with(tmp_path, Topics(None, None))
    try:
        provider.on_message(Message("user", "we adopted a whippet"), Session(id="old"))
        assert provider.settle(60)
        assert provider.prefetch("tell me about my pet", Session(id="now")) is None
    finally:
        provider.shutdown()


def test_prefetch_recalls_by_meaning_when_switched_on(tmp_path: Path) -> None:
    provider = provider_with(tmp_path, Topics(None, None), prefetch=True, prefetch_chars=400)
    try:
        provider.on_message(Message("user", "we adopted a whippet called Pepper"),
                            Session(id="old", title="New dog"))
        provider.on_message(Message("user", "grey and rainy all weekend"), Session(id="other"))
        assert provider.settle(60)
        now = Session(id="now")
        provider.on_message(Message("user", "what is my pet called?"), now)
        text = provider.prefetch("what is my pet called?", now)
        assert text is not None and len(text) <= 400
        assert "Pepper" in text and "(session old)" in text
        assert "what is my pet called" not in text  # the current session is left out
        # the same search as session_search: its first result is prefetch's first line
        first = session_search(provider.archive, "what is my pet called?",
                               current_session_id="now", **provider._search_settings())
        assert first["results"][0]["session_id"] == "old"
    finally:
        provider.shutdown()


def test_prefetch_without_an_embedder_uses_word_search(tmp_path: Path) -> None:
    provider = provider_with(tmp_path, None, prefetch=True)
    try:
        provider.on_message(Message("user", "the nginx timeout was the proxy buffer"),
                            Session(id="old"))
        text = provider.prefetch("nginx timeout", Session(id="now"))
        assert text is not None and "proxy buffer" in text
        assert provider.prefetch("???", Session(id="now")) is None  # an unusable query
    finally:
        provider.shutdown()


def test_reindex_after_a_model_switch_rebuilds_the_index(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db", background_checkpoints=False) as a:
        a.append_messages("s", [Message("user", "the whippet"), Message("user", "rain")])
        g1 = GuardedEmbedder(Topics(None, None))
        reindex(a, g1)
        index = VectorIndex(a)
        sem = Semantic(embedder=g1, index=index)
        assert session_search(a, "my pet", semantic=sem)["semantic"] == "on"

        class Wider(Table):  # same model id, another dimension: still a different model
            model_id = "topics-v1"

        g2 = GuardedEmbedder(Wider(None, None))
        out = session_search(a, "whippet", semantic=Semantic(embedder=g2, index=index))
        assert "reindex" in out["semantic"] and "(2 dimensions)" in out["semantic"]
        assert out["results"][0]["session_id"] == "s"  # word search meanwhile
        reindex(a, g2)
        out = session_search(a, "whippet", semantic=Semantic(embedder=g2, index=index))
        assert out["semantic"] == "on" and len(index) == 2
