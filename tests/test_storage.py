"""storage.url: parsing and redaction, the config key and its env override, the PostgreSQL
pool's clear connection errors, and the versioned migrations (newer and foreign databases)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from hermes_core.config import load_config, redacted
from hermes_core.errors import ConfigError
from hermes_core.storage import (
    StorageConnectError,
    StorageError,
    StorageForeignError,
    StorageVersionError,
    get_pool,
    parse_storage_url,
    redact_url,
    resolve_storage_url,
)
from hermes_core.storage.migrations import migrate, schema_versions

SECRET = "s3cr3t-pw"


def test_redaction_hides_every_password_form() -> None:
    text = (f"postgresql://bob:{SECRET}@db:5432/h and postgres://x:{SECRET}@h/d "
            f"and postgresql://h/d?sslmode=require&password={SECRET}")
    out = redact_url(text)
    assert SECRET not in out
    assert "postgresql://bob:***@db:5432/h" in out and "password=***" in out


def test_url_validation_names_the_problem_without_the_password() -> None:
    assert parse_storage_url("postgres://u:p@h:5/db").url == "postgresql://u:p@h:5/db"
    with pytest.raises(StorageError, match="unsupported scheme 'mysql'") as info:
        parse_storage_url(f"mysql://u:{SECRET}@h/db")
    assert SECRET not in str(info.value)
    with pytest.raises(StorageError, match="names no database"):
        parse_storage_url(f"postgresql://u:{SECRET}@h:5432")
    with pytest.raises(StorageError, match="invalid port"):
        parse_storage_url("postgresql://u@h:99999999/db")
    with pytest.raises(StorageError, match="at most"):
        parse_storage_url("postgresql://h/" + "d" * 10_000)
    assert repr(parse_storage_url(f"postgresql://u:{SECRET}@h/db")).count(SECRET) == 0


@pytest.mark.parametrize(("value", "problem"), [
    (f"postgresql:/u:{SECRET}@h/db", "does not start with postgresql://"),
    (f"postgresql:u:{SECRET}@h/db", "does not start with postgresql://"),
    (f"postgresql://u:{SECRET} x@h/db", "space"),
    (f"postgresql://u:{SECRET}@x@h/db", "more than one '@'"),
    (f"host=h password={SECRET} dbname=db", "unsupported scheme"),
    (f"host=h password='{SECRET} x' dbname=db", "unsupported scheme"),
])
def test_a_malformed_url_is_refused_without_its_password(
    home: Path, monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    """A slash missing, a space or an unencoded '@' in the password, a libpq key=value string:
    refused before any connection, and neither the message nor the config error shows it."""
    with pytest.raises(StorageError, match=problem) as info:
        parse_storage_url(value)
    assert SECRET not in str(info.value)
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", value)
    with pytest.raises(ConfigError, match=problem) as config_info:
        load_config(home)
    assert SECRET not in str(config_info.value)


def test_redaction_covers_an_at_sign_and_a_missing_slash() -> None:
    out = redact_url(f"connect to postgresql://u:{SECRET}@x@h/db or postgresql:/u:{SECRET}@h/d "
                     f"(host=h password={SECRET})")
    assert SECRET not in out and "@x" not in out, out


def test_config_key_env_override_and_redacted_dump(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_config(home).core.storage.url is None
    (home / "config.yaml").write_text(f"storage:\n  url: postgresql://u:{SECRET}@h/a\n")
    assert load_config(home).core.storage.url == f"postgresql://u:{SECRET}@h/a"
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", "postgresql://u:other@h/b")
    loaded = load_config(home)
    assert loaded.core.storage.url == "postgresql://u:other@h/b"
    assert resolve_storage_url(loaded.core.storage.url).database == "b"  # type: ignore[union-attr]
    dump = str(redacted(loaded.core.model_dump()))
    assert "other" not in dump and "postgresql://u:***@h/b" in dump
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", f"sqlite:///x?password={SECRET}")
    with pytest.raises(ConfigError, match="unsupported scheme") as info:
        load_config(home)
    assert SECRET not in str(info.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_clear_error_naming_the_redacted_url() -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://u:{SECRET}@127.0.0.1:{_closed_port()}/db"
    with pytest.raises(StorageConnectError) as info:
        get_pool(url)
    message = str(info.value)
    assert SECRET not in message
    assert "postgresql://u:***@127.0.0.1:" in message and "server runs" in message


def test_wrong_password_is_a_clear_error(pg_server: Any) -> None:
    url = f"postgresql://{pg_server.user}:{SECRET}@127.0.0.1:{pg_server.port}/{pg_server.database}"
    with pytest.raises(StorageConnectError, match="password authentication failed") as info:
        get_pool(url)
    assert SECRET not in str(info.value) and "check the user name and password" in str(info.value)


MIGRATIONS = [
    (1, "a table", ["CREATE TABLE hc_demo (x INTEGER)"]),
    (2, "a column", ["ALTER TABLE hc_demo ADD COLUMN y TEXT"]),
]


def _con(url: str) -> Any:
    import psycopg

    return psycopg.connect(url)


def test_migrations_run_forward_once_and_refuse_a_newer_schema(pg_url: str) -> None:
    url = parse_storage_url(pg_url)
    with _con(pg_url) as con:
        assert migrate(con, url, "demo", MIGRATIONS[:1]) == [1]
        con.execute("INSERT INTO hc_demo VALUES (7)")
        con.commit()
        assert migrate(con, url, "demo", MIGRATIONS) == [2]
        assert migrate(con, url, "demo", MIGRATIONS) == []
        assert schema_versions(con) == {"demo": 2}
        assert con.execute("SELECT x, y FROM hc_demo").fetchall() == [(7, None)]
        with pytest.raises(StorageVersionError, match="version 2, newer than this hermes-core "
                                                      r"knows \(1\); upgrade") as info:
            migrate(con, url, "demo", MIGRATIONS[:1])
        assert "hermes:***@127.0.0.1" in str(info.value)
        assert con.execute("SELECT x FROM hc_demo").fetchall() == [(7,)]


def test_a_foreign_database_is_refused_and_left_alone(pg_url: str) -> None:
    url = parse_storage_url(pg_url)
    with _con(pg_url) as con:
        con.execute("CREATE TABLE customers (id INTEGER)")
        con.commit()
        with pytest.raises(StorageForeignError, match=r"not hermes-core's \(customers\)") as info:
            migrate(con, url, "demo", MIGRATIONS)
        assert pg_url.split("@")[0].split(":")[-1] not in str(info.value)  # no password
        assert {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public'")} == {"customers"}


def test_a_foreign_table_with_our_name_beside_our_schema_is_a_clear_refusal(pg_url: str) -> None:
    """A hermes-core database (``hermes_schema`` present) that also holds someone else's table
    with the name a component creates: a StorageForeignError naming the table, not a
    DuplicateTable traceback; the database is left as it was."""
    url = parse_storage_url(pg_url)
    with _con(pg_url) as con:
        assert migrate(con, url, "other", [(1, "t", ["CREATE TABLE hc_other (x INTEGER)"])]) == [1]
        con.execute("CREATE TABLE hc_demo (id TEXT PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO hc_demo VALUES ('k', 'theirs')")
        con.commit()
        with pytest.raises(StorageForeignError, match=r"demo schema .* version 1 .*hc_demo") as info:
            migrate(con, url, "demo", MIGRATIONS)
        assert "hermes:***@127.0.0.1" in str(info.value)
        con.rollback()
        assert schema_versions(con) == {"other": 1}
        assert con.execute("SELECT id, name FROM hc_demo").fetchall() == [("k", "theirs")]
