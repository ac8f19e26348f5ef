"""``hermes-core doctor``'s checks of the session archive (the ``doctor_checks`` hook).

The configured archive file (``session_archive.path``, else ``<home>/state.db``): readable,
sound (``PRAGMA quick_check``), a session archive of a schema this version knows, the
messages waiting in its spool, and the kept rows of the commonest words (:func:`words_check`).
Everything is read-only: a damaged file is never modified.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.config import LoadedConfig, validate_section
from hermes_core.doctor import DoctorCheck
from hermes_core.errors import HermesCoreError
from hermes_core.storage import StorageURL
from hermes_core.storage.spool import Spool

from .config import SessionArchiveConfig
from .db import connect_read_only, recovery_advice, spool_path
from .schema import APPLICATION_ID, LATEST_VERSION

__all__ = ["STALE_SHARE", "archive_checks", "archive_location", "words_check"]


def archive_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    path, name = archive_location(home, config)
    url = _database(config)
    if url is not None:  # the file is not in use: say where the archive is instead
        return [DoctorCheck(name, True, f"not used: the archive is in the database {url} "
                            "(storage.url; the activation check connects to it)"),
                erasure_log_check(home, url)]
    checks = [check_archive(path, name), erasure_log_check(home, None)]
    if _derive_on(config) and path.exists():
        checks.append(derivation_check(path))
    if checks[0].ok and path.exists():
        words = words_check(path)
        if words is not None:
            checks.append(words)
    return checks


def _derive_on(config: LoadedConfig) -> bool:
    try:
        return bool(validate_section(config, "session_archive", SessionArchiveConfig,
                                     plugin="session_archive").derive)
    except HermesCoreError:
        return False


def derivation_check(path: Path) -> DoctorCheck:
    """Derived memory's lane (session_archive.derive): facts stored, turns waiting, the last
    problem (a failing model, refused answers). Read-only, like every check here."""
    from .facts import read_state

    name = "derived memory"
    try:
        con, _note = connect_read_only(path)
        try:
            state = read_state(lambda sql, params=(): con.execute(sql, params).fetchall())
        finally:
            con.close()
    except sqlite3.Error as exc:
        return DoctorCheck(name, True, f"{path}: not readable yet ({exc}); the archive creates "
                           "its facts table at its next start", warning=True)
    per_turn = state.tokens_per_turn()
    detail = (f"{state.facts} facts ({state.current} current) from {state.turns} turns, "
              f"{state.backlog} turn(s) waiting"
              + (f", {per_turn:.0f} model tokens per turn" if per_turn else ""))
    if state.error:
        return DoctorCheck(name, True, f"{detail}; last problem: {state.error}", warning=True,
                           fix="check the auxiliary model (llm.auxiliary_client / "
                               "llm.auxiliary_model and its key); waiting turns are derived "
                               "once it answers")
    return DoctorCheck(name, True, detail)


#: seconds after which a forget still noted as running is reported (no forget takes that long)
STALLED_FORGET = 600.0


def erasure_log_check(home: Path, url: StorageURL | None) -> DoctorCheck:
    """The erasure log the archive re-applies forgets from (hermes_core.storage.erasure_log):
    readable, and no forget that started and never finished (a process stopped mid-way)."""
    import time

    from hermes_core.storage.erasure_log import ErasureLog

    log = ErasureLog(home, url)
    where = url.redacted if url is not None else str(log.path)
    try:
        stalled = log.stalled(time.time() - STALLED_FORGET)
    except Exception as exc:
        return DoctorCheck("erasure log", False, f"{where}: cannot be read ({exc})",
                           fix="make the file readable (or the database reachable): a forget "
                               "landing during a turn is otherwise not applied to its answer")
    finally:
        log.close()
    if stalled:
        return DoctorCheck("erasure log", True, f"{where}: {stalled} forget(s) started more than "
                           f"{STALLED_FORGET / 60:.0f} minutes ago never finished (the process "
                           "was stopped?)", warning=True,
                           fix="run each recent 'hermes-core forget' again: what it had not "
                               "deleted yet is still stored")
    return DoctorCheck("erasure log", True, f"{where}: no unfinished forget")


def _database(config: LoadedConfig) -> StorageURL | None:
    """The ``storage.url`` in effect (its text shows the password redacted), or None."""
    from hermes_core.storage import StorageError, resolve_storage_url

    try:
        return resolve_storage_url(config.core.storage.url)
    except StorageError:  # the config check reports a bad URL
        return None


def archive_location(home: Path, config: LoadedConfig) -> tuple[Path, str]:
    """The configured archive file and the check's name (``state.db`` or ``archive (NAME)``).

    A section that does not validate still names its file when ``path`` is a string: doctor
    checks the file the user meant while the config check reports the section's error."""
    from . import archive_path

    try:
        settings = validate_section(config, "session_archive", SessionArchiveConfig,
                                    plugin="session_archive")
    except HermesCoreError:
        raw = config.raw.get("session_archive")
        configured = raw.get("path") if isinstance(raw, dict) else None
        settings = SessionArchiveConfig(path=configured if isinstance(configured, str) else None)
    path = archive_path(settings, Path(home))
    return path, ("state.db" if path == Path(home) / "state.db" else f"archive ({path.name})")


def check_archive(path: Path, name: str = "state.db") -> DoctorCheck:
    if not path.exists():
        return DoctorCheck(name, True, f"{path} not created yet")
    if not os.access(path, os.R_OK):
        return DoctorCheck(name, False, f"{path} cannot be read (permission denied); it was left "
                           "untouched: fix its permissions (it is not damaged)")
    note = None
    try:
        # Read-only: doctor must never modify, let alone overwrite, a damaged database.
        con, note = connect_read_only(path)
        try:
            result = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if "malformed" not in text and "not a database" not in text and "corrupt" not in text:
            # Locks, permissions, a read-only folder: nothing says the data is damaged.
            return DoctorCheck(name, False, f"{path} could not be checked ({exc}); it was left "
                               "untouched and nothing suggests it is damaged: check the file's "
                               "and its folder's permissions, then run doctor again")
        return DoctorCheck(name, False, f"{path} is damaged ({exc}); it was left untouched. "
                           f"{recovery_advice(path)}")
    except sqlite3.DatabaseError as exc:
        return DoctorCheck(
            name, False, f"{path} cannot be read as SQLite ({exc}); it was left untouched. If it "
            "is not your session archive, set session_archive.path to another file; if it is, "
            f"{recovery_advice(path)}")
    ok = result == "ok"
    detail = (f"{path}: integrity ok" if ok else
              f"{path}: integrity check failed: {result}; it was left untouched. "
              f"{recovery_advice(path)}")
    if ok:
        ok, detail = _check_identity(path, detail)
    if note:
        detail += f" (note: {note})"
    spooled = _spooled(path)
    if spooled:
        detail += (f"; {spooled} message(s) wait in {path.name}.spool.jsonl and will be stored "
                   "by the next write that succeeds")
    return DoctorCheck(name, ok, detail, warning=bool(spooled))


def _spooled(path: Path) -> int:
    try:
        return len(Spool(spool_path(path)))
    except OSError:
        return 0


def _check_identity(path: Path, detail: str) -> tuple[bool, str]:
    """Is the (sound) file a session archive this version can open? Read-only, like the rest."""
    con, _note = connect_read_only(path)
    try:
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == APPLICATION_ID and version <= LATEST_VERSION:
            sessions = con.execute("SELECT count(*) FROM sessions").fetchone()[0]
            return True, f"{detail}; session archive schema {version}, {sessions} sessions"
    except sqlite3.DatabaseError as exc:
        return False, f"{detail}, but it cannot be read as a session archive ({exc})"
    finally:
        con.close()
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
        return False, (f"{path} is an SQLite file of another application, not a hermes-core "
                       "session archive; it was left untouched. Move it aside or set "
                       "session_archive.path to another file")
    if version > LATEST_VERSION:
        return False, (f"{path} has schema version {version}, written by a newer hermes-core "
                       f"(this one knows {LATEST_VERSION}); upgrade hermes-core. It was left "
                       "untouched")
    return True, f"{detail} (empty)"


#: share of the messages newer than the kept rows' build from which doctor advises a new one
STALE_SHARE = 0.25
_REINDEX = "hermes-core sessions reindex --words"


@dataclass(frozen=True, slots=True)
class _WordsCheck(DoctorCheck):
    """A check whose ``--json`` form also carries its figures (``kept_words``)."""

    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**DoctorCheck.to_dict(self), "kept_words": dict(self.figures)}


def words_check(path: Path) -> DoctorCheck | None:
    """The kept best messages of the commonest words (impacts.py): built or not, the words kept,
    the newest id covered and how many messages are newer (ranked by FTS5 itself). Advice (a
    warning naming ``sessions reindex --words``) when not built while the archive holds at
    least ``impacts.MIN_DF_LOW`` indexed messages (below that no word can be kept), or when
    :data:`STALE_SHARE` of the messages or more are newer than the build. Cheap: meta, the
    small ``term_bounds``, FTS5's totals record, the sessions' message counts and a range count
    of the newer ids; the word index itself is not read. None when the file cannot be read."""
    from . import impacts

    try:
        con, _note = connect_read_only(path)
        try:
            figures = _words_figures(con)
        finally:
            con.close()
    except sqlite3.Error:
        return None  # the archive check reports what is wrong with the file
    # the fewest messages from which a word can be kept: the second tier starts lower
    figures["min_messages"] = min_df = min(impacts.MIN_DF, impacts.MIN_DF_LOW)
    figures["stale_share"] = STALE_SHARE
    name = "common words"
    messages, indexed = figures["messages"], figures["indexed"]
    if not figures["built"]:
        if indexed < min_df:
            return _WordsCheck(name, True, f"not built; not needed yet: {indexed:,} indexed "
                               f"messages, a word is kept from {min_df:,} on", figures=figures)
        return _WordsCheck(name, True, f"not built: {indexed:,} indexed messages, so a one-word "
                           "search of a common word scores every match", warning=True,
                           fix=f"run '{_REINDEX}' (seconds at 100k messages, minutes at 1M)",
                           figures=figures)
    newer, share = figures["newer"], figures["newer_share"]
    detail = (f"{figures['words']} word(s) kept, built up to message {figures['upto']}; "
              f"{newer:,} of {messages:,} messages ({share:.0%}) are newer (ranked by FTS5)")
    if share >= STALE_SHARE and indexed >= min_df:
        return _WordsCheck(name, True, f"{detail}: the build is stale", warning=True,
                           fix=f"run '{_REINDEX}' to rank them from the kept rows too",
                           figures=figures)
    return _WordsCheck(name, True, detail, figures=figures)


def _words_figures(con: sqlite3.Connection) -> dict[str, Any]:
    from . import impacts

    messages = int(con.execute("SELECT coalesce(sum(message_count), 0) FROM sessions"
                               ).fetchone()[0])
    indexed = impacts._totals(con)[0]
    has_rows = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'term_bounds'").fetchone()
    row = con.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?",
                      (impacts.UPTO,)).fetchone()
    out: dict[str, Any] = {"built": bool(has_rows and row), "messages": messages,
                           "indexed": indexed, "words": None, "upto": None, "newer": None,
                           "newer_share": None}
    if out["built"]:
        upto = int(row[0])
        newer = int(con.execute("SELECT count(*) FROM messages WHERE id > ?", (upto,)
                                ).fetchone()[0])
        out.update(words=int(con.execute("SELECT count(*) FROM term_bounds").fetchone()[0]),
                   upto=upto, newer=newer, newer_share=newer / messages if messages else 0.0)
    return out
