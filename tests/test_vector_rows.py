"""The one vector row shape (hermes_core.storage.vectors): in the session archive, on both
backends, every vector written names its model and the hash of the text it was made from (as
the lossless engine's do), and an archive from before (schema 4) keeps its vectors, still
searched, and gains the columns without a row rewritten."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_session_archive_hybrid import Synonyms, top

from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive, open_archive
from hermes_core.plugins.memory.session_archive.config import SessionArchiveConfig
from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex
from hermes_core.plugins.memory.session_archive.vectors import TEXT_CHARS, reindex
from hermes_core.semantic import text_key
from hermes_core.types import Message, Session


def fill(archive: SessionArchive) -> None:
    archive.open_session(Session(id="s-dog"))
    archive.append_messages("s-dog", [Message("user", "We adopted a whippet"),
                                      Message("assistant", "from the shelter " * 200)])
    archive.open_session(Session(id="s-db"))
    archive.append_messages("s-db", [Message("user", "the database migration failed")])


def rows(archive: SessionArchive) -> list[tuple[str, str | None, str | None]]:
    """(message text, model, text hash) of every vector row."""
    return sorted(archive.db.read(
        "SELECT m.content, v.model, v.text_hash FROM message_vectors AS v JOIN messages AS m "
        "ON m.id = v.id"))


def test_every_vector_names_its_model_and_text(tmp_path: Path, storage_url: str | None) -> None:
    archive = open_archive(SessionArchiveConfig(), tmp_path, storage_url)
    try:
        fill(archive)
        assert reindex(archive, GuardedEmbedder(Synonyms(None, None))) == 3
        stored = rows(archive)
        assert [(model, key) for _t, model, key in stored] == [
            ("synonyms-v1", text_key(text[:TEXT_CHARS])) for text, _m, _k in stored]
        assert len(stored[1][0]) > TEXT_CHARS  # the hash is of what was embedded: its start
    finally:
        archive.close()


def test_an_archive_from_before_keeps_its_vectors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as archive:
        fill(archive)
        reindex(archive, GuardedEmbedder(Synonyms(None, None)))
    # back to schema 4: the vector rows as that version wrote them
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE message_vectors DROP COLUMN model")
    con.execute("ALTER TABLE message_vectors DROP COLUMN text_hash")
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    with SessionArchive(path) as archive:
        assert archive.db.read("PRAGMA user_version")[0][0] == 6
        assert [(m, k) for _t, m, k in rows(archive)] == [(None, None)] * 3  # not rewritten
        embedder = GuardedEmbedder(Synonyms(None, None))
        out = session_search(archive, "what pet did we get",
                             semantic=Semantic(embedder=embedder, index=VectorIndex(archive)))
        assert top(out)[0] == "s-dog" and out["semantic"] == "on"
        archive.open_session(Session(id="s-rent"))
        archive.append_messages("s-rent", [Message("user", "the landlord raised the rent")])
        assert reindex(archive, embedder) == 1  # only the new message
        assert ("the landlord raised the rent", "synonyms-v1",
                text_key("the landlord raised the rent")) in rows(archive)


@pytest.mark.parametrize("table, key", [("message_vectors", "id")])
def test_the_statement_is_written_once(table: str, key: str) -> None:
    from hermes_core.storage.vectors import upsert_sql

    sql = upsert_sql(table, "messages", key=key, item_condition="length(content) > ?")
    assert sql.startswith(f"INSERT INTO {table}({key}, model, text_hash, vec) SELECT ?, ?, ?, ?")
    assert "WHERE id = ? AND length(content) > ?" in sql and f"ON CONFLICT ({key})" in sql
