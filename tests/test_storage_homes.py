"""One storage.url, two homes: a replay in one home is listed and searched from another."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli

EXAMPLE = Path(__file__).parent.parent / "examples" / "returning-user.jsonl"


def _run(home: Path, url: str, *args: str) -> str:
    result = CliRunner().invoke(
        cli, list(args), env={"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url},
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_replay_in_one_home_is_seen_from_another(tmp_path: Path, pg_url: str) -> None:
    first, second = tmp_path / "node-a", tmp_path / "node-b"
    first.mkdir()
    second.mkdir()
    _run(first, pg_url, "replay", str(EXAMPLE))
    assert not (first / "state.db").exists()  # nothing written to SQLite as a fallback
    listed = json.loads(_run(second, pg_url, "sessions", "list", "--json"))
    assert listed and all(s["message_count"] > 0 for s in listed)
    found = json.loads(_run(second, pg_url, "sessions", "search", "RabbitMQ", "--json"))
    hits = found["hits"] if isinstance(found, dict) else found
    assert hits and any("RabbitMQ" in h["snippet"] for h in hits)
    assert not (second / "state.db").exists()


def test_an_unreachable_url_is_an_error_and_writes_no_file(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://u:hunter2@127.0.0.1:{port}/db"
    result = CliRunner().invoke(cli, ["sessions", "list"], env={
        "HERMES_CORE_HOME": str(tmp_path), "HERMES_CORE_STORAGE_URL": url})
    assert result.exit_code != 0
    assert "hunter2" not in result.output and "cannot connect" in result.output
    assert "postgresql://u:***@127.0.0.1" in result.output
    assert not (tmp_path / "state.db").exists()


def test_two_nodes_appending_to_one_conversation_lose_nothing(pg_url: str) -> None:
    """Two archives on one database (two nodes) create the same sessions at the same moment
    and append to them from threads: every message is stored once, each session row once."""
    import threading

    from hermes_core.plugins.memory.session_archive.search import search_messages
    from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
    from hermes_core.storage import parse_storage_url
    from hermes_core.types import Message, Session

    url = parse_storage_url(pg_url)
    nodes = [PgSessionArchive(url), PgSessionArchive(url)]
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(node: PgSessionArchive, tag: str) -> None:
        try:
            start.wait(timeout=30)
            for i in range(25):
                node.append_message(Session(id=f"conv{i % 5}", platform="webhook"),
                                    Message("user", f"{tag} says ocelot {i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(nodes[k % 2], f"w{k}")) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert nodes[0].count_messages() == 100
    listed = nodes[1].list_sessions(limit=50)
    assert sorted(s.id for s in listed) == [f"conv{i}" for i in range(5)]
    assert sum(s.message_count for s in listed) == 100
    texts = [m.content for s in listed for m in nodes[0].messages(s.id)]
    assert len(set(texts)) == 100
    assert search_messages(nodes[1], "ocelot", limit=200).hits


def test_storage_show_names_a_foreign_database(tmp_path: Path, pg_url: str) -> None:
    """``storage show`` on a database of something else says so (every store refuses it)
    instead of listing nothing, and leaves it alone."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE customers (id INTEGER)")
    shown = json.loads(_run(tmp_path, pg_url, "storage", "show", "--json"))
    assert shown["schema"] == {} and shown["foreign_tables"] == ["customers"]
    result = CliRunner().invoke(cli, ["storage", "show"], env={
        "HERMES_CORE_HOME": str(tmp_path), "HERMES_CORE_STORAGE_URL": pg_url})
    assert "not hermes-core's (customers)" in result.output, result.output
    with psycopg.connect(pg_url) as con:
        assert [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public'")] == ["customers"]
