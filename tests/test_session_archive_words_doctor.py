"""``hermes-core doctor`` reports the kept best messages of the commonest words (impacts.py) of a
SQLite archive: not built (advice once the archive is large enough for a word to be kept), built
(words, covered id, messages newer than the build, advice once a quarter of them are newer), and
nothing for an archive in PostgreSQL. Real archive files, the threshold lowered for speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hermes_core.plugins.memory.session_archive import SessionArchive, impacts
from hermes_core.types import Message

NAME = "common words"
REINDEX = "hermes-core sessions reindex --words"


def checks() -> dict[str, dict[str, Any]]:
    from hermes_core.cli.doctor_cmd import run_checks

    return {c["name"]: c for c in run_checks()}


def _fill(db: Path, sessions: int, per: int, tag: str = "s") -> None:
    with SessionArchive(db) as archive:
        for s in range(sessions):
            archive.append_messages(f"{tag}{s}", [
                Message("user" if i % 2 else "assistant", f"alpha bravo note {s} {i} kilo")
                for i in range(per)])


def _build(db: Path) -> int:
    with SessionArchive(db) as archive:
        return impacts.rebuild(archive, keep=8)


def test_not_built_small_archive_says_so_without_advice(home: Path) -> None:
    _fill(home / "state.db", 3, 10)
    check = checks()[NAME]
    assert check["ok"] and not check["warning"] and "fix" not in check, check
    assert "not built" in check["detail"] and "not needed yet" in check["detail"]
    assert "a word is kept from 4,000 on" in check["detail"]
    figures = check["kept_words"]
    assert figures["built"] is False and figures["messages"] == 30 and figures["indexed"] == 30
    assert figures["words"] is None and figures["upto"] is None and figures["newer"] is None
    # the second tier keeps words from 4,000 messages (and 0.4 %), not only the first's 10,000
    assert figures["min_messages"] == impacts.MIN_DF_LOW == 4_000 < impacts.MIN_DF


def test_not_built_large_archive_advises_reindex(home: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(home / "state.db", 3, 10)
    monkeypatch.setattr(impacts, "MIN_DF", 30)  # as if 30 messages were many
    check = checks()[NAME]
    assert check["ok"] and check["warning"], check  # advice, not an error
    assert "not built" in check["detail"] and "30 indexed messages" in check["detail"]
    assert REINDEX in check["fix"]
    assert check["kept_words"]["built"] is False and check["kept_words"]["min_messages"] == 30
    monkeypatch.setattr(impacts, "MIN_DF", 31)  # one message short: no word can be kept
    check = checks()[NAME]
    assert not check["warning"] and "fix" not in check and "not needed yet" in check["detail"]
    # too few for the first tier, enough for the second: the build keeps words, so advise it
    monkeypatch.setattr(impacts, "MIN_DF_LOW", 30)
    check = checks()[NAME]
    assert check["warning"] and REINDEX in check["fix"] and check["kept_words"]["min_messages"] == 30


def test_built_reports_words_covered_id_and_newer_share(home: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    db = home / "state.db"
    _fill(db, 4, 10)
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    words = _build(db)
    assert words >= 3  # alpha, bravo, kilo (and note) are in every message
    check = checks()[NAME]
    assert check["ok"] and not check["warning"] and "fix" not in check, check
    figures = check["kept_words"]
    assert figures == {"built": True, "messages": 40, "indexed": 40, "words": words, "upto": 40,
                       "newer": 0, "newer_share": 0.0, "min_messages": 20,
                       "stale_share": 0.25}
    assert f"{words} word(s) kept, built up to message 40" in check["detail"]
    assert "0 of 40 messages (0%) are newer" in check["detail"]

    _fill(db, 1, 13, tag="n")  # 13 of 53 newer: 24.5 %, under the threshold
    check = checks()[NAME]
    assert not check["warning"] and check["kept_words"]["newer"] == 13, check
    assert "13 of 53 messages (25%) are newer" in check["detail"]  # rounded for display only

    _fill(db, 1, 1, tag="m")  # 14 of 54: 25.9 %, stale
    check = checks()[NAME]
    assert check["ok"] and check["warning"] and REINDEX in check["fix"], check
    assert check["kept_words"]["newer"] == 14 and check["kept_words"]["upto"] == 40
    assert check["kept_words"]["newer_share"] == pytest.approx(14 / 54)
    assert "stale" in check["detail"]

    words = _build(db)  # rebuilt: nothing newer, no advice
    check = checks()[NAME]
    assert not check["warning"] and check["kept_words"]["upto"] == 54
    assert check["kept_words"]["words"] == words
    assert check["kept_words"]["newer"] == 0


def test_stale_build_of_a_small_archive_gives_no_advice(home: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Newer messages in an archive too small for any kept word: nothing to gain from a build."""
    db = home / "state.db"
    _fill(db, 2, 10)
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    _build(db)
    _fill(db, 2, 10, tag="n")
    monkeypatch.setattr(impacts, "MIN_DF", 41)
    check = checks()[NAME]
    assert check["kept_words"]["newer"] == 20 and check["kept_words"]["newer_share"] == 0.5
    assert not check["warning"] and "fix" not in check, check


def test_doctor_json_carries_the_figures(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_core.cli.doctor_cmd import doctor

    db = home / "state.db"
    _fill(db, 3, 10)
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    _build(db)
    _fill(db, 1, 20, tag="n")
    out = CliRunner().invoke(doctor, ["--json"])
    assert out.exit_code == 0, out.output
    check = next(c for c in json.loads(out.output) if c["name"] == NAME)
    assert check["plugin"] == "session_archive" and check["warning"]
    assert check["kept_words"]["upto"] == 30 and check["kept_words"]["newer"] == 20
    assert check["kept_words"]["newer_share"] == pytest.approx(0.4)
    text = CliRunner().invoke(doctor, [])
    assert f"session_archive / {NAME}: " in text.output and f"fix: run '{REINDEX}'" in text.output


def test_nothing_said_for_an_archive_in_postgresql(home: Path, pg_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(home / "state.db", 3, 10)  # an unused file, large by the lowered threshold
    monkeypatch.setattr(impacts, "MIN_DF", 20)
    assert checks()[NAME]["warning"]
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    assert NAME not in checks()
