"""The storage dialect's spellings, run on both backends: a real SQLite file and a throwaway
PostgreSQL database (the ``storage_url`` fixture). One table, one statement per spelling, the
rows checked; and a refused statement's error, which must not carry a URL's password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_core.errors import HermesCoreError
from hermes_core.storage.dialect import Database, PgDatabase, SqliteDatabase
from hermes_core.storage.url import parse_storage_url

SCHEMA = "CREATE TABLE things (name TEXT PRIMARY KEY, attrs TEXT, n INTEGER NOT NULL)"


class ThingError(HermesCoreError):
    pass


@pytest.fixture
def db(tmp_path: Path, storage_url: str | None) -> Iterator[Database]:
    database: Database
    if storage_url is None:
        database = SqliteDatabase(tmp_path / "things.db", schema=SCHEMA)
    else:
        database = PgDatabase(parse_storage_url(storage_url), "dialect-test",
                              [(1, "things", [SCHEMA])], error=ThingError, what="the things")
    rows = [("Alpha", '{"colour": "red", "size": 3}', 5), ("beta", '{"colour": "blue"}', 1)]
    with database.transaction() as con:
        database.executemany(con, "INSERT INTO things(name, attrs, n) VALUES (?, ?, ?)", rows)
    yield database
    database.close()


def test_case_insensitive_equality(db: Database) -> None:
    found = db.fetch(f"SELECT name FROM things WHERE {db.nocase_equals('name', '?')}", ("aLPHA",))
    assert found == [("Alpha",)]
    assert db.fetch(f"SELECT name FROM things WHERE {db.nocase_equals('name', '?')}",
                    ("alph",)) == []


def test_a_json_keys_text(db: Database) -> None:
    colour = db.json_text("attrs", "colour")
    assert db.fetch(f"SELECT name FROM things WHERE {colour} = ? ORDER BY name",
                    ("blue",)) == [("beta",)]
    assert db.fetch(f"SELECT name, {colour} FROM things ORDER BY name") == [
        ("Alpha", "red"), ("beta", "blue")]
    shape = db.json_text("attrs", "shape")
    assert db.fetch(f"SELECT count(*) FROM things WHERE {shape} IS NULL") == [(2,)]  # not there


def test_a_malformed_json_value_is_null_on_sqlite(tmp_path: Path) -> None:
    db = SqliteDatabase(tmp_path / "things.db", schema=SCHEMA)
    db.execute("INSERT INTO things(name, attrs, n) VALUES ('odd', 'not json', 0)")
    assert db.fetch(f"SELECT {db.json_text('attrs', 'colour')} FROM things") == [(None,)]
    db.close()


def test_the_larger_of_two_values_and_named_placeholders(db: Database) -> None:
    for value in (3, 9, 4):
        db.execute(f"UPDATE things SET n = {db.greatest('n', ':value')} WHERE name = :name",
                   {"value": value, "name": "Alpha"})  # type: ignore[arg-type]
    assert db.fetchone("SELECT n FROM things WHERE name = :name", {"name": "Alpha"}) == (9,)  # type: ignore[arg-type]


def test_a_refused_statement_names_the_store_and_hides_a_urls_password(
        tmp_path: Path, pg_url: str) -> None:
    db = PgDatabase(parse_storage_url(pg_url), "dialect-test", [(1, "things", [SCHEMA])],
                    error=ThingError, what="the things")
    with pytest.raises(ThingError) as info:
        db.fetch("SELECT CAST(? AS integer)", ("postgresql://someone:hunter2@db.example/x",))
    text = str(info.value)
    assert text.startswith("the things in ") and "refused the request" in text
    assert "hunter2" not in text and "nothing was changed" in text
