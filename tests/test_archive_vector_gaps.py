"""The archive's message vectors leave no gap and never describe another message's text.

* PostgreSQL: a transaction that commits long after its ids were given (an import, a stalled
  node) puts messages below the indexer's look-back; the indexer's sweep and ``reindex`` still
  embed them.
* SQLite gives the next message the id after the largest one left: after the newest messages are
  forgotten, new messages reuse ids the cursor had passed, and a message deleted while its text
  was being embedded can hand its vector to the new message that took its id.

The embedder is a fake model (a hash of the text: each vector says which text it was made
from); the databases are real (state.db, the conftest's PostgreSQL server).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from hermes_core.embeddings import GuardedEmbedder  # noqa: E402
from hermes_core.plugins.memory.session_archive import SessionArchive, open_archive  # noqa: E402
from hermes_core.plugins.memory.session_archive import vector_store as vector_store_mod  # noqa: E402
from hermes_core.plugins.memory.session_archive.config import SessionArchiveConfig  # noqa: E402
from hermes_core.plugins.memory.session_archive.forget import forget_messages  # noqa: E402
from hermes_core.plugins.memory.session_archive.store import _INSERT_MESSAGE  # noqa: E402
from hermes_core.plugins.memory.session_archive.vectors import (  # noqa: E402
    VectorIndexer,
    index_batch,
    reindex,
)
from hermes_core.types import Message, Session  # noqa: E402


class Hashed:
    """A fake model: a text's SHA-256 over 8 axes, normalised."""

    name = "hashed"
    model_id = "hashed-v1"
    dimension = 8

    def __init__(self) -> None:
        self.before_first: Any = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.before_first is not None:  # something happens while the model works
            hook, self.before_first = self.before_first, None
            hook()
        return [vector(t) for t in texts]


def vector(text: str) -> list[float]:
    v = np.asarray([b - 127.5 for b in hashlib.sha256(text.encode()).digest()[:8]])
    return list(v / np.linalg.norm(v))


def vectors_by_text(archive: SessionArchive) -> dict[str, bool | None]:
    """Each user message's text -> its vector is that text's (None: it has no vector)."""
    rows = archive.db.read("SELECT m.content, v.vec FROM messages AS m LEFT JOIN "
                           "message_vectors AS v ON v.id = m.id WHERE m.role = 'user'")
    out: dict[str, bool | None] = {}
    for text, vec in rows:
        if vec is None:
            out[text] = None
        else:
            stored = np.frombuffer(bytes(vec), dtype=np.float16).astype(np.float32)
            out[text] = float(np.dot(stored, vector(text))) > 0.99
    return out


def sqlite_archive(tmp_path: Path) -> SessionArchive:
    return SessionArchive(tmp_path / "state.db")


def add(archive: SessionArchive, sid: str, *texts: str) -> None:
    archive.open_session(Session(id=sid))
    for text in texts:
        archive.append_message(sid, Message("user", text))


def test_sqlite_messages_after_the_newest_were_forgotten_get_vectors(tmp_path):
    archive = sqlite_archive(tmp_path)
    g = GuardedEmbedder(Hashed())
    add(archive, "s", "plain one", "plain two", "secret plan alpha", "secret plan beta")
    while index_batch(archive, g) > 0:
        pass
    forget_messages(archive, "secret plan")
    add(archive, "s", "later one", "later two")  # they take the forgotten messages' ids
    while index_batch(archive, g) > 0:
        pass
    assert vectors_by_text(archive) == {"plain one": True, "plain two": True,
                                        "later one": True, "later two": True}


def test_sqlite_a_message_deleted_while_embedded_gives_no_vector_to_its_successor(tmp_path):
    archive = sqlite_archive(tmp_path)
    model = Hashed()
    g = GuardedEmbedder(model)
    add(archive, "s", "first words", "doomed words")

    def meanwhile() -> None:  # while the model embeds: forget the newest, append another
        forget_messages(archive, "doomed words")
        add(archive, "s", "replacement words")

    model.before_first = meanwhile
    index_batch(archive, g)
    assert vectors_by_text(archive).get("replacement words") is not False  # never the old text's
    while index_batch(archive, g) > 0:
        pass
    assert vectors_by_text(archive) == {"first words": True, "replacement words": True}


@pytest.fixture()
def pg_archive(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    pytest.importorskip("psycopg")
    monkeypatch.setattr(vector_store_mod, "LOOKBACK", 20)  # a short look-back: few messages
    archive = open_archive(SessionArchiveConfig(path=str(tmp_path / "a.db")), tmp_path / "a",
                           pg_url)
    yield archive
    archive.close()


def commit_late(archive: SessionArchive, g: GuardedEmbedder) -> None:
    """Insert a message in a transaction that stays open while 40 later messages (twice the
    look-back) are stored and embedded, then commit it: its id is far below the cursor."""
    # ids far from 1 (a database that has seen many messages, deleted since): the sweep
    # must go by messages, not by a range of ids
    archive.db.read("SELECT setval(pg_get_serial_sequence('messages', 'id'), 100000)")
    add(archive, "s-late", "opening words")
    num = archive.db.read("SELECT num FROM sessions WHERE id = 's-late'")[0][0]
    inserted, commit = threading.Event(), threading.Event()

    def slow(con: Any) -> None:
        con.execute(_INSERT_MESSAGE, (num, "user", "the late message", None, None, None, 1.0,
                                      None))
        inserted.set()
        assert commit.wait(60)

    t = threading.Thread(target=archive.db.write, args=(slow,))
    t.start()
    assert inserted.wait(60)
    add(archive, "s-busy", *[f"busy message {k}" for k in range(40)])
    while index_batch(archive, g, 8) > 0:
        pass
    commit.set()
    t.join(60)
    assert not t.is_alive()
    assert vectors_by_text(archive)["the late message"] is None


def test_postgresql_a_message_committed_past_the_look_back_is_found_by_reindex(pg_archive):
    g = GuardedEmbedder(Hashed())
    commit_late(pg_archive, g)
    assert reindex(pg_archive, g) == 1
    found = vectors_by_text(pg_archive)
    assert found["the late message"] is True and all(found.values())


def test_postgresql_the_background_indexer_sweeps_up_a_message_committed_late(pg_archive):
    g = GuardedEmbedder(Hashed())
    commit_late(pg_archive, g)
    indexer = VectorIndexer(pg_archive, g, batch=8)
    try:
        assert indexer.wait_done(60)
    finally:
        indexer.close()
    found = vectors_by_text(pg_archive)
    assert found["the late message"] is True and all(found.values())


def test_postgresql_the_indexer_survives_a_sweep_that_fails(pg_archive, monkeypatch):
    """The sweep for late commits runs where nothing else is pending; a database failure there
    (an outage, the pool closed under it at shutdown) pauses the indexer like a failure of its
    batches, instead of ending its thread."""
    g = GuardedEmbedder(Hashed())
    add(pg_archive, "s", "one message")
    store = vector_store_mod.vector_store(pg_archive)
    failures = []

    def gone(*_args: Any) -> Any:
        failures.append(1)
        raise RuntimeError("the server went away")

    monkeypatch.setattr(type(store), "id_after", gone)
    indexer = VectorIndexer(pg_archive, g, batch=8)
    try:
        assert not indexer.wait_done(30)  # paused by the failure: not done, and not dead
        assert failures and "the server went away" in (indexer.error or "")
        assert indexer._thread.is_alive()
        monkeypatch.undo()
        assert vectors_by_text(pg_archive) == {"one message": True}  # the batch stood
    finally:
        indexer.close()


def test_sqlite_a_loaded_index_drops_the_vectors_of_forgotten_messages(tmp_path):
    """An index loaded before a forget (a running server's) holds the forgotten messages'
    vectors. SQLite gives their ids to the next messages: the index must not keep describing
    them by the forgotten text (found by the forgotten meaning, never by their own)."""
    from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex

    archive = sqlite_archive(tmp_path)
    g = GuardedEmbedder(Hashed())
    add(archive, "s", "plain one", "plain two", "secret plan alpha")
    while index_batch(archive, g) > 0:
        pass
    index = VectorIndex(archive)
    index.refresh(8)
    assert len(index) == 3
    forget_messages(archive, "secret plan")  # another process: the index is not told
    add(archive, "s", "later one")  # it takes the forgotten message's id
    while index_batch(archive, g) > 0:
        pass
    index.refresh(8)  # what a search does first
    later = archive.db.read("SELECT id FROM messages WHERE content = 'later one'")[0][0]
    best_for_forgotten = index.nearest(np.asarray(vector("secret plan alpha"), np.float32), 1)
    assert best_for_forgotten[0][1] < 0.99  # nothing stored is that text any more
    found = index.nearest(np.asarray(vector("later one"), np.float32), 1)
    assert found == [(later, pytest.approx(1.0, abs=0.01))]
    archive.close()
