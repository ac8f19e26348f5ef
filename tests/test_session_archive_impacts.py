"""The kept best messages of the commonest words (impacts.py): a one-word search read from them
ranks exactly as FTS5's bm25 over every match (ids, scores, order, ties), under every scope, as
messages are appended, forgotten and stored under reused ids, and after a torn write."""

from __future__ import annotations

import itertools
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_core.plugins.memory.session_archive import SessionArchive, impacts, search
from hermes_core.plugins.memory.session_archive.forget import forget_messages
from hermes_core.types import Message, Session, ToolCall

COMMON = ["alpha", "bravo", "kilo", "delta"]
WORDS = COMMON + [f"w{i}" for i in range(40)]
QUERIES = ["alpha", "bravo", "kilo", "delta", "Alpha!", "w3", "alpha -bravo"]
KS = (1, 7, 40, 300, 2000)


def _text(rng: random.Random) -> str:
    n = rng.choice([2, 3, 5, 8, 13, 30, 80])
    # the common words most often, at varied counts, so that lengths and counts decide
    return " ".join(rng.choice(COMMON) if rng.random() < 0.3 else rng.choice(WORDS)
                    for _ in range(n))


def _fill(archive: SessionArchive, rng: random.Random, sessions: int, per: int,
          tag: str = "s") -> None:
    for s in range(sessions):
        sid = f"{tag}{s}"
        archive.open_session(Session(id=sid, attributes={"user_id": f"u{s % 3}"}))
        msgs = []
        for _ in range(per):
            kind = rng.random()
            if kind < 0.1:  # a tool call: the word in the arguments column (weight 0.6)
                msgs.append(Message("assistant", _text(rng), tool_calls=[
                    ToolCall(id=f"c{rng.random()}", name="lookup",
                             arguments={"q": _text(rng)})]))
            elif kind < 0.2:  # a tool result: the tool name column (weight 0.5)
                msgs.append(Message("tool", _text(rng), tool_call_id="c", tool_name="alpha"))
            else:
                msgs.append(Message(rng.choice(["user", "assistant"]), _text(rng)))
        archive.append_messages(sid, msgs)


def _scopes(archive: SessionArchive) -> list[dict[str, object]]:
    return [{}, {"exclude_lineage_of": "s1"}, {"user": "u1"}, {"roles": ("user",)},
            {"user": "u2", "exclude_lineage_of": "s2", "roles": ("assistant", "tool")}]


def _compare(archive: SessionArchive, monkeypatch: pytest.MonkeyPatch) -> int:
    """Assert the kept rows' answer equals FTS5's over every match; how many they answered."""
    used = 0
    real = search.top_k

    def counting(*args: object, **kwargs: object) -> list[tuple[int, float]] | None:
        nonlocal used
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        used += out is not None
        return out

    for q in QUERIES:
        plan = search.plan_query(archive, q)
        for scope in _scopes(archive):
            for k in KS:
                monkeypatch.setattr(search, "top_k", lambda *a, **kw: None)
                every = search.candidates(archive, plan, limit=k, **scope)  # type: ignore[arg-type]
                monkeypatch.setattr(search, "top_k", counting)
                kept = search.candidates(archive, plan, limit=k, **scope)  # type: ignore[arg-type]
                assert [(c.id, c.score) for c in kept] == [(c.id, c.score) for c in every], (
                    q, scope, k)
    monkeypatch.setattr(search, "top_k", real)
    return used


@pytest.fixture
def archive(tmp_path: Path) -> SessionArchive:
    a = SessionArchive(tmp_path / "state.db")
    _fill(a, random.Random(5), sessions=12, per=120)
    yield a
    a.close()


def _rows(archive: SessionArchive) -> int:
    return int(archive.db.read("SELECT count(*) FROM term_impacts")[0][0])


def test_one_word_ranking_is_bm25_over_every_match(archive: SessionArchive,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    built = impacts.rebuild(archive, keep=60, min_df=50)
    bounds = dict(archive.db.read("SELECT term, bound FROM term_bounds"))
    assert built == len(bounds) >= len(COMMON)
    assert _rows(archive) <= 60 * built
    # the common words have more matches than are kept: their bound is what proves the rest
    assert all(bounds[w] > 0 for w in COMMON)
    used = _compare(archive, monkeypatch)
    # answered from the kept rows where they can prove it (not every scope and k can)
    assert used >= 40


def test_words_just_under_the_common_ones_keep_fewer_rows_and_rank_the_same(
        archive: SessionArchive, monkeypatch: pytest.MonkeyPatch) -> None:
    # the common words (in most messages) keep 60; the others in 100 messages or more keep 20
    built = impacts.rebuild(archive, keep=60, min_df=600, keep_low=20, min_df_low=100)
    counts = dict(archive.db.read("SELECT b.term, count(*) FROM term_bounds AS b JOIN "
                                  "term_impacts AS t ON t.term = b.num GROUP BY b.term"))
    bounds = dict(archive.db.read("SELECT term, bound FROM term_bounds"))
    assert built == len(counts) > len(COMMON)
    assert all(counts[w] == 60 for w in COMMON)
    low = [w for w in counts if w not in COMMON]
    assert "w3" in low and all(counts[w] == 20 and bounds[w] > 0 for w in low)
    used = _compare(archive, monkeypatch)
    # without the second tier those words are ranked by FTS5 only
    impacts.rebuild(archive, keep=60, min_df=600, keep_low=0)
    assert int(archive.db.read("SELECT count(*) FROM term_bounds")[0][0]) == len(COMMON)
    assert used > _compare(archive, monkeypatch)


def test_never_built_archive_ranks_every_match(archive: SessionArchive,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert archive.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,)) == []
    assert _compare(archive, monkeypatch) == 0


def test_an_empty_archive_builds_nothing_and_then_ranks_its_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a new archive's FTS5 averages record is empty (no sizes at all): the build read it as
    # a list and raised IndexError (storage migrate of an archive without messages failed)
    a = SessionArchive(tmp_path / "empty.db")
    try:
        assert impacts.rebuild(a, keep=60, min_df=50) == 0
        assert _rows(a) == 0
        _fill(a, random.Random(9), sessions=4, per=60)
        assert _compare(a, monkeypatch) == 0  # nothing kept yet: FTS5 ranks every match
    finally:
        a.close()


def test_appends_forget_and_reused_ids_keep_it_exact(archive: SessionArchive,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    impacts.rebuild(archive, keep=60, min_df=50)
    upto = int(archive.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,))[0][0])
    rng = random.Random(9)
    # newer messages (ranked by FTS5 above the covered id), longer ones moving the average
    _fill(archive, rng, sessions=3, per=80, tag="n")
    archive.open_session(Session(id="long"))
    archive.append_messages("long", [Message("user", " ".join(["alpha"] * 3 + ["w1"] * 200))
                                     for _ in range(30)])
    assert _compare(archive, monkeypatch) > 0
    # forget: the forgotten messages leave no row
    found = archive.db.read(
        "SELECT DISTINCT t.doc FROM term_impacts AS t JOIN messages AS m ON m.id = t.doc "
        "WHERE m.content LIKE '%w7%'")
    assert found
    forget_messages(archive, "w7")
    gone = [r[0] for r in found]
    left = archive.db.read(
        f"SELECT count(*) FROM term_impacts WHERE doc IN ({','.join('?' * len(gone))})", gone)
    assert left[0][0] == 0
    assert _compare(archive, monkeypatch) > 0
    # the newest messages deleted, then ids at or below the covered one stored again
    newest = int(archive.db.read("SELECT max(id) FROM messages")[0][0])
    archive.db.write(lambda con: con.execute("DELETE FROM messages WHERE id > ?", (upto - 50,)))
    kept_max = int(archive.db.read("SELECT max(id) FROM messages")[0][0])
    archive.open_session(Session(id="again"))
    archive.append_messages("again", [Message("user", "alpha alpha bravo")] * 5)
    now = int(archive.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,))[0][0])
    assert now == kept_max < upto < newest  # the first reused id is kept_max + 1
    assert _compare(archive, monkeypatch) > 0
    # a message changed in place is ranked by FTS5 from then on
    archive.db.write(lambda con: con.execute(
        "UPDATE messages SET content = 'alpha alpha alpha' WHERE id = 10"))
    now = int(archive.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,))[0][0])
    assert now == 9
    _compare(archive, monkeypatch)


def test_a_build_cut_short_is_never_read(archive: SessionArchive, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    impacts.rebuild(archive, keep=60, min_df=50)
    before = archive.db.read("SELECT * FROM term_impacts ORDER BY term, key, doc")
    archive.close()
    # another process builds again and is killed after writing some words' rows
    script = textwrap.dedent(f"""
        import os
        from hermes_core.plugins.memory.session_archive import SessionArchive, impacts
        real, done = impacts._keep_word, []
        def keep_word(*args, **kwargs):
            real(*args, **kwargs)
            done.append(1)
            if len(done) == 2:
                os._exit(3)
        impacts._keep_word = keep_word
        impacts.rebuild(SessionArchive({str(tmp_path / 'state.db')!r}), keep=60, min_df=50)
    """)
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ), check=False)
    assert done.returncode == 3
    with SessionArchive(tmp_path / "state.db") as again:
        # the covered id is set last: without it every match is scored, never a partial build
        assert again.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,)) == []
        assert 0 < int(again.db.read("SELECT count(*) FROM term_impacts")[0][0]) < len(before)
        assert _compare(again, monkeypatch) == 0
        impacts.rebuild(again, keep=60, min_df=50)
        assert again.db.read("SELECT * FROM term_impacts ORDER BY term, key, doc") == before
        assert _compare(again, monkeypatch) > 0


def test_a_message_forgotten_during_a_build_is_never_kept(
        archive: SessionArchive, monkeypatch: pytest.MonkeyPatch) -> None:
    impacts.rebuild(archive, keep=60, min_df=50)
    # a message kept for several words after the first: a build from the snapshot would keep it
    victim = int(archive.db.read(
        "SELECT doc FROM term_impacts WHERE term >= 2 GROUP BY doc ORDER BY count(*) DESC "
        "LIMIT 1")[0][0])
    real, calls = impacts._scored, []

    def scored(*args: object) -> object:
        calls.append(1)
        if len(calls) == 2:  # the snapshot is taken: the message goes meanwhile
            archive.db.write(lambda con: con.execute("DELETE FROM messages WHERE id = ?",
                                                     (victim,)))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(impacts, "_scored", scored)
    kept = impacts.rebuild(archive, keep=60, min_df=50)
    monkeypatch.setattr(impacts, "_scored", real)
    assert kept >= len(COMMON) and len(calls) > kept  # started again after the deletion
    assert archive.db.read("SELECT count(*) FROM term_impacts WHERE doc = ?", (victim,)) == [
        (0,)]
    assert _compare(archive, monkeypatch) > 0
    # changes during every attempt: it gives up, and every match is scored
    ticks = itertools.count()
    monkeypatch.setattr(impacts, "_changes", lambda con: next(ticks))
    assert impacts.rebuild(archive, keep=60, min_df=50, attempts=2) == 0
    monkeypatch.undo()
    assert archive.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,)) == []
    assert _rows(archive) == 0


def test_an_archive_without_the_tables_ranks_every_match(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        _fill(a, random.Random(3), sessions=4, per=60)
        impacts.rebuild(a, keep=20, min_df=20)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE term_bounds")
    con.commit()
    con.close()
    with SessionArchive(path) as a:
        assert _compare(a, monkeypatch) == 0


def test_storage_migrate_into_a_file_builds_them(tmp_path: Path, pg_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    with SessionArchive(first / "state.db") as a:
        _fill(a, random.Random(4), sessions=6, per=40)
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    for home, args in ((first, ["--to", pg_url]), (second, ["--from", pg_url])):
        result = CliRunner().invoke(cli, ["storage", "migrate", *args, "--json"],
                                    env={"HERMES_CORE_HOME": str(home)}, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    with SessionArchive(second / "state.db") as b:
        assert b.count_messages() == 240
        upto = b.db.read("SELECT value FROM meta WHERE key = ?", (impacts.UPTO,))
        assert upto and int(upto[0][0]) == b.db.read("SELECT max(id) FROM messages")[0][0]
        assert {"alpha", "bravo", "kilo", "delta"} <= {
            r[0] for r in b.db.read("SELECT term FROM term_bounds")}
        assert _compare(b, monkeypatch) > 0


def test_sessions_reindex_words_rebuilds_them(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli

    with SessionArchive(tmp_path / "state.db") as a:
        _fill(a, random.Random(6), sessions=5, per=50)
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    env = {"HERMES_CORE_HOME": str(tmp_path), "HERMES_CORE_STORAGE_URL": ""}
    result = CliRunner().invoke(cli, ["sessions", "reindex", "--words", "--json"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    import json

    out = json.loads(result.output)
    with SessionArchive(tmp_path / "state.db") as a:
        assert out == {"words": len(a.db.read("SELECT term FROM term_bounds")),
                       "covered_up_to": a.db.read("SELECT max(id) FROM messages")[0][0]}
        assert out["words"] >= len(COMMON)
        assert _compare(a, monkeypatch) > 0
    plain = CliRunner().invoke(cli, ["sessions", "reindex", "--words"], env=env,
                               catch_exceptions=False)
    assert plain.exit_code == 0 and "common words kept" in plain.output, plain.output


def test_forgetting_a_common_word_leaves_it_nowhere_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        a.open_session(Session(id="s", attributes={}))
        a.append_messages("s", [Message("user", f"note {i} about the Quillmarsh project")
                                for i in range(30)] +
                          [Message("user", f"plain note {i}") for i in range(30)])
        assert impacts.rebuild(a, keep=5, min_df=10) > 0
        stem = "quillmarsh"
        assert a.db.read("SELECT 1 FROM term_bounds WHERE term = ?", (stem,))
        assert forget_messages(a, "quillmarsh").deleted == 30
        assert not a.db.read("SELECT 1 FROM term_bounds WHERE term = ?", (stem,))
        # the other common words still answer from their kept rows
        assert a.db.read("SELECT 1 FROM term_bounds WHERE term = 'note'")
    leftover = [p.name for p in tmp_path.iterdir() if stem.encode() in p.read_bytes().lower()]
    assert leftover == []
