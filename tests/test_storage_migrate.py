"""``storage migrate --to URL`` and sessions export/import between the backends, without loss."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory.store import MemoryStore
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session, ToolCall, Usage


def _run(home: Path, *args: str, url: str | None = None) -> str:
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url or ""}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _fill(home: Path) -> list[str]:
    with SessionArchive(home / "state.db") as a:
        a.open_session(Session(id="s1", title="Printer", attributes={"user_id": "alice"}))
        a.append_messages("s1", [
            Message("user", "the printer shows E42 \x00 again 番茄"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "terminal", {"cmd": "lpstat"})],
                    meta={"usage": {"input_tokens": 5}}),
            Message("tool", "idle", tool_name="terminal", tool_call_id="t1"),
        ])
        a.record_usage("s1", Usage(input_tokens=100, output_tokens=7), cost_usd=0.25)
        a.open_session(Session(id="s2", parent_session_id="s1"), origin="compression")
        a.append_message("s2", Message("user", "carried", meta={"carried_over": "s1"}))
        a.end_session("s2", "user_exit")
        a.open_session(Session(id="s3", title="Dinner"))
        a.append_message("s3", Message("user", "pasta"))
    shared = MemoryStore(home / "memories")
    shared.add("memory", "the build uses make")
    MemoryStore(home / "memories" / "users" / "alice").add("user", "alice likes oolong")
    return ["s1", "s2", "s3"]


def _export(home: Path, ids: list[str], url: str | None) -> list[dict]:
    out = home / f"export-{'pg' if url else 'sqlite'}.jsonl"
    _run(home, "sessions", "export", *ids, "-o", str(out), url=url)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_migrate_copies_sessions_and_memory_without_loss(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ids = _fill(home)
    report = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert (report["copied"]["sessions"], report["copied"]["messages"]) == (3, 5)
    assert sorted(report["plugins"]["file_memory"]["detail"]["copied"]) == [
        "(shared)/memory", "alice/user"]
    assert report["errors"] == []
    assert "hermes-test" not in json.dumps(report)  # the password never printed
    assert _export(home, ids, pg_url) == _export(home, ids, None)  # lossless
    shown = json.loads(_run(home, "memory", "show", "--json", "--user", "alice", url=pg_url))
    assert shown["user"]["entries"] == ["alice likes oolong"]
    assert json.loads(_run(home, "memory", "show", "--json", url=pg_url))["memory"][
        "entries"] == ["the build uses make"]
    again = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert (again["copied"]["sessions"], again["skipped"]["sessions"]) == (0, 3)
    assert again["plugins"]["file_memory"]["detail"]["copied"] == []
    versions = json.loads(_run(home, "storage", "show", "--json", url=pg_url))
    assert versions["backend"] == "postgresql" and set(versions["schema"]) == {
        "session_archive", "file_memory"}


def test_sessions_exported_from_postgresql_import_into_sqlite_unchanged(
    tmp_path: Path, pg_url: str
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    ids = _fill(first)
    _run(first, "storage", "migrate", "--to", pg_url, "--json")
    from_pg = first / "from-pg.jsonl"
    _run(first, "sessions", "export", *ids, "-o", str(from_pg), url=pg_url)
    _run(second, "sessions", "import", str(from_pg), "--json")
    assert _export(second, ids, None) == _export(first, ids, None)


def test_export_all_moves_a_whole_archive_into_the_other_backend(tmp_path: Path,
                                                                   pg_url: str) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    ids = _fill(first)
    whole = first / "all.jsonl"
    _run(first, "sessions", "export", "--all", "-o", str(whole))
    heads = [json.loads(line)["id"] for line in whole.read_text(encoding="utf-8").splitlines()
             if json.loads(line)["type"] == "session"]
    assert heads == ids  # in the order they were created: a parent before its compaction
    report = json.loads(_run(second, "sessions", "import", str(whole), "--json", url=pg_url))
    assert report["sessions_imported"] == 3
    assert _export(second, ids, pg_url) == _export(first, ids, None)
    alice = first / "alice.jsonl"
    _run(second, "sessions", "export", "--all", "--user", "alice", "-o", str(alice), url=pg_url)
    assert [json.loads(line)["id"] for line in alice.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["type"] == "session"] == ["s1"]
    for args, says in ((["s1", "--all"], "not both"), ([], "or give --all"),
                       (["s1", "--user", "alice"], "--user goes with --all")):
        result = CliRunner().invoke(cli, ["sessions", "export", *args],
                                    env={"HERMES_CORE_HOME": str(first)})
        assert result.exit_code == 2 and says in result.output, result.output


def _fill_other_stores(home: Path) -> None:
    """Memory history and pins (shared and per user), skills (one unusable), lossless spans."""
    from compressor_support import build_history, make_context

    from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine
    from hermes_core.plugins.memory.file_memory.history import Provenance
    from hermes_core.plugins.memory.file_memory.pins import pin
    from hermes_core.plugins.memory.skills import SkillLibrary

    shared = MemoryStore(home / "memories")
    shared.add("user", "Lives in Berlin", by=Provenance("assistant_tool", "s1", "toolu_1"))
    shared.replace("user", "Berlin", "Lives in Lisbon")
    pin(shared, "memory", "make")
    alice = MemoryStore(home / "memories" / "users" / "alice")
    alice.add("memory", "alice deploys on Fridays")
    skills = SkillLibrary(home / "skills")
    skills.create("deploy", "Deploy to staging", "1. make release")
    (home / "skills" / "broken.md").write_text("no front matter", encoding="utf-8")
    (home / "skills" / "binary.md").write_bytes(b"---\xff\xfe\x00")
    engine = LosslessEngine(LosslessConfig(), make_context(home, window=60_000))
    engine.bind_session(Session(id="s1"))
    history = build_history(60, seed=31)
    history.insert(20, Message("user", "the bucket is quokka-archive-7 \x00 nul"))
    engine.compact(history)
    engine.bind_session(Session(id="s3"))
    engine.compact(build_history(150, seed=34))
    engine.store.close()


def _snapshot(home: Path, url: str | None) -> dict:
    """Everything the non-archive stores hold, read through their own code, comparable."""
    from hermes_core.plugins.context_engine.lossless import SpanStore
    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.plugins.context_engine.lossless.transfer import as_json, dump
    from hermes_core.plugins.memory.file_memory.pg_store import PgMemoryStore
    from hermes_core.plugins.memory.file_memory.pins import read_pins
    from hermes_core.plugins.memory.skills import SkillLibrary
    from hermes_core.plugins.memory.skills.pg_library import PgSkillLibrary
    from hermes_core.storage import parse_storage_url

    out: dict = {}
    for owner in ("", "alice"):
        if url:
            store: MemoryStore = PgMemoryStore(parse_storage_url(url), owner=owner)
        else:
            folder = home / "memories" / ("users/alice" if owner else "")
            store = MemoryStore(folder)
        assert store.history is not None
        out[owner] = {
            "docs": {t: store.read(t).raw for t in ("memory", "user")},
            "history": [v.to_dict() for v in store.history.read()],
            "pins": read_pins(store),
        }
    library = PgSkillLibrary(parse_storage_url(url)) if url else SkillLibrary(home / "skills")
    out["skills"] = dict(library.raw())
    out["skill_errors"] = {s.name: s.error for s in library.all()}
    spans = PgSpanStore(parse_storage_url(url)) if url else SpanStore(home / "context.db")
    out["lossless"] = as_json(dump(spans))
    return out


def test_migrate_carries_history_pins_skills_and_the_lossless_archive(
    tmp_path: Path, pg_url: str
) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    ids = _fill(home)
    _fill_other_stores(home)
    before = _snapshot(home, None)
    report = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    copied = report["copied"]
    assert copied["memory_versions"] == 5 and copied["memory_pins"] == 1
    assert report["plugins"]["skills"]["detail"] == {
        "copied": ["binary", "broken", "deploy"], "kept": []}
    assert (copied["lossless_conversations"], copied["lossless_spans"],
            report["plugins"]["lossless"]["detail"]["renumbered"]) == (2, 2, 0)
    assert _snapshot(home, pg_url) == before  # every store, exactly
    assert _export(home, ids, pg_url) == _export(home, ids, None)
    # the way back: the database into an empty home's files, every store exactly again
    back = tmp_path / "back"
    back.mkdir()
    returned = json.loads(_run(back, "storage", "migrate", "--from", pg_url, "--json"))
    assert (returned["copied"]["sessions"], returned["copied"]["memory_versions"],
            returned["copied"]["lossless_spans"]) == (3, 5, 2)
    assert _snapshot(back, None) == before
    assert _export(back, ids, None) == _export(home, ids, None)
    # a second home on the database sees the same history and continues it
    shown = json.loads(_run(other, "memory", "history", "--json", url=pg_url))
    assert shown == json.loads(_run(home, "memory", "history", "--json"))
    _run(other, "memory", "rollback", "2", url=pg_url)
    assert json.loads(_run(other, "memory", "history", "--json", url=pg_url))[-1][
        "version"] == 4
    assert "Lives in Berlin" in _run(other, "memory", "show", url=pg_url)
    listed = json.loads(_run(other, "skills", "list", "--json", url=pg_url))
    assert [(s["name"], "error" in s) for s in listed] == [
        ("binary", True), ("broken", True), ("deploy", False)]
    again = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert (again["copied"]["memory_versions"], again["plugins"]["skills"]["detail"]["copied"],
            again["copied"]["lossless_spans"], again["skipped"]["lossless_conversations"]) == (
        0, [], 0, 2)
    versions = json.loads(_run(home, "storage", "show", "--json", url=pg_url))
    # "erasures": the rollback above raised the erasure generation (for running servers)
    assert set(versions["schema"]) == {"session_archive", "file_memory", "skills", "lossless",
                                       "erasures"}
    text = _run(home, "storage", "migrate", "--to", pg_url)
    assert "lossless archive: 0 span(s)" in text and "2 already there" in text


def test_migrate_needs_exactly_one_direction_and_a_good_url(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": ""}
    both = CliRunner().invoke(cli, ["storage", "migrate", "--to", "postgresql://a/b", "--from",
                                    "postgresql://a/b"], env=env)
    assert both.exit_code == 2 and "exactly one of --to URL" in both.output
    bad = CliRunner().invoke(cli, ["storage", "migrate", "--from", "mysql://u:pw@h/db"], env=env)
    assert bad.exit_code == 2 and "--from" in bad.output and "unsupported scheme" in bad.output
    assert "pw@" not in bad.output
    dead = CliRunner().invoke(cli, ["storage", "migrate", "--to",
                                    "postgresql://hermes:s3cret@127.0.0.1:1/hermes"], env=env)
    assert dead.exit_code == 1 and "cannot connect" in dead.output
    assert "s3cret" not in dead.output and "hermes:***@127.0.0.1:1/hermes" in dead.output
    back = CliRunner().invoke(cli, ["storage", "migrate", "--from",
                                    "postgresql://hermes:s3cret@127.0.0.1:1/hermes"], env=env)
    assert back.exit_code == 1 and "s3cret" not in back.output
    # nothing written on the way (the CLI's own log folder aside)
    assert [p.name for p in home.iterdir() if p.name != "logs"] == []
