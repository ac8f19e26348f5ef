"""``hermes-core doctor``: what is set up, what is broken, and how to fix it."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import click

from ._common import echo_json, load_host

__all__ = ["doctor", "run_checks"]


def _check_state_db(path: Any, name: str = "state.db") -> dict[str, Any]:
    from ..plugins.memory.session_archive.db import connect_read_only, recovery_advice

    if not path.exists():
        return {"name": name, "ok": True, "detail": f"{path} not created yet"}
    if not os.access(path, os.R_OK):
        return {"name": name, "ok": False, "detail": f"{path} cannot be read (permission "
                "denied); it was left untouched: fix its permissions (it is not damaged)"}
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
            return {"name": name, "ok": False, "detail": f"{path} could not be checked ({exc}); "
                    "it was left untouched and nothing suggests it is damaged: check the "
                    "file's and its folder's permissions, then run doctor again"}
        return {"name": name, "ok": False,
                "detail": f"{path} is damaged ({exc}); it was left untouched. "
                f"{recovery_advice(path)}"}
    except sqlite3.DatabaseError as exc:
        return {
            "name": name,
            "ok": False,
            "detail": f"{path} cannot be read as SQLite ({exc}); it was left untouched. If it "
            "is not your session archive, set session_archive.path to another file; if it is, "
            f"{recovery_advice(path)}",
        }
    ok = result == "ok"
    detail = (f"{path}: integrity ok" if ok else
              f"{path}: integrity check failed: {result}; it was left untouched. "
              f"{recovery_advice(path)}")
    if ok:
        ok, detail = _check_archive_identity(path, detail)
    if note:
        detail += f" (note: {note})"
    spooled = _spooled(path)
    if spooled:
        detail += (f"; {spooled} message(s) wait in {path.name}.spool.jsonl and will be stored "
                   "by the next write that succeeds")
    return {"name": name, "ok": ok, "warning": bool(spooled), "detail": detail}


def _spooled(path: Any) -> int:
    from ..plugins.memory.session_archive.db import spool_path
    from ..plugins.memory.session_archive.spool import Spool

    try:
        return len(Spool(spool_path(path)).read())
    except OSError:
        return 0


def _check_archive_identity(path: Any, detail: str) -> tuple[bool, str]:
    """Is the (sound) file a session archive this version can open? Read-only, like the rest."""
    from ..plugins.memory.session_archive.db import connect_read_only
    from ..plugins.memory.session_archive.schema import APPLICATION_ID, LATEST_VERSION

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


def _archive_location(host: Any, home: Any) -> tuple[Any, str]:
    """The configured archive file (``session_archive.path``), or ``<home>/state.db``."""
    from pathlib import Path

    from ..errors import HermesCoreError
    from ..plugins.memory.session_archive import SessionArchiveConfig, archive_path

    section = "session_archive"
    try:
        settings = host._section_model(section, host.config)
    except (HermesCoreError, KeyError):
        raw = host.config.raw.get(section)
        configured = raw.get("path") if isinstance(raw, dict) else None
        settings = SessionArchiveConfig(path=configured if isinstance(configured, str) else None)
    path = archive_path(settings, Path(home))
    return path, ("state.db" if path == Path(home) / "state.db" else f"archive ({path.name})")


def _check_memory_files(host: Any, home: Any) -> list[dict[str, Any]]:
    """MEMORY.md and USER.md: readable, UTF-8, within their limits, in the form the store writes."""
    from pathlib import Path

    from ..errors import HermesCoreError
    from ..plugins.memory.file_memory.config import FileMemoryConfig
    from ..plugins.memory.file_memory.entries import joined_size, usage_label
    from ..plugins.memory.file_memory.store import FILENAMES, MemoryStore

    try:
        settings = host._section_model("file_memory", host.config)
    except (HermesCoreError, KeyError):
        settings = FileMemoryConfig()
    store = MemoryStore(Path(home) / "memories", memory_limit=settings.memory_char_limit,
                        user_limit=settings.user_char_limit)
    out: list[dict[str, Any]] = []
    for target, filename in FILENAMES.items():
        path = store.path(target)
        state = store.read(target)
        check: dict[str, Any] = {"name": filename, "ok": True}
        if state.problem is not None:
            check.update(ok=False, detail=f"{state.problem}. It was left untouched: fix it, or "
                         f"move it aside (mv {path} {path}.corrupt) to start that store afresh")
        elif state.raw is None:
            check["detail"] = f"{path} not created yet"
        else:
            size, limit = joined_size(state.entries), store.limit(target)
            notes = []
            if size > limit:
                notes.append(f"over its limit ({usage_label(size, limit)}): the agent can only "
                             "remove or shorten entries; trim it with 'hermes-core memory edit'")
            if b"\r" in state.raw:
                notes.append("has Windows (CRLF) line endings: it reads fine and is rewritten "
                             "with \\n endings (after a .bak copy) on the next change")
            elif state.edited:
                notes.append("was edited by hand (not in the store's exact form): a .bak copy is "
                             "made before the next change rewrites it")
            check["warning"] = bool(notes)
            check["detail"] = (f"{path}: {len(state.entries)} entries, "
                               f"{usage_label(size, limit)}" + "".join(f"; {n}" for n in notes))
        out.append(check)
    return out


def run_checks() -> list[dict[str, Any]]:
    """Each check: name, ok (bool), detail, and 'warning' for problems that do not block."""
    from ..config import load_config
    from ..errors import HermesCoreError
    from ..paths import home_dir

    checks: list[dict[str, Any]] = []
    home = home_dir()
    writable = home.exists() and os.access(home, os.W_OK)
    if not home.exists():
        state = "will be created on first use"
    else:
        state = "writable" if writable else "NOT writable: fix its permissions"
    checks.append({"name": "home", "ok": writable or not home.exists(), "detail": f"{home} ({state})"})
    config_ok = True
    try:
        loaded = load_config()
        checks.append({"name": "config", "ok": True,
                       "detail": f"{loaded.path}" + ("" if loaded.exists else " (absent: defaults)")})
    except HermesCoreError as exc:
        config_ok = False
        checks.append({"name": "config", "ok": False, "detail": str(exc)})
    host = load_host(tolerate_bad_config=True)
    broken = [r for r in host.records.values() if r.error]
    checks.append({
        "name": "plugins",
        "ok": True,
        "warning": bool(broken),
        "detail": f"{sum(r.enabled and not r.error for r in host.records.values())} loaded, "
        f"{sum(not r.enabled for r in host.records.values())} disabled, {len(broken)} with errors"
        + "".join(f"\n  {r.name}: {r.error}" for r in broken),
    })
    if config_ok:
        try:
            host.validate_config()
            checks.append({"name": "selections", "ok": True, "detail":
                           f"context.engine={host.config.core.context.engine}, memory.providers="
                           f"{host.config.core.memory.providers}"})
        except HermesCoreError as exc:
            checks.append({"name": "selections", "ok": False, "detail": str(exc)})
        else:
            errors, warnings = host.dry_activation()
            lines = [f"\n  {m}" for m in errors] + [f"\n  warning: {m}" for m in warnings]
            checks.append({"name": "activation", "ok": not errors, "warning": bool(warnings),
                           "detail": ("every selected provider, the engine and the tools start"
                                      if not errors else f"{len(errors)} problem(s) a session "
                                      "would hit") + "".join(lines)})
    checks.append(_check_state_db(*_archive_location(host, home)))
    checks.extend(_check_memory_files(host, home))
    key_set = bool(host.config.core.llm.api_key)
    checks.append({
        "name": "api key",
        "ok": True,
        "warning": not key_set,
        "detail": "ANTHROPIC_API_KEY is set" if key_set else
        "no key: set ANTHROPIC_API_KEY (or llm.api_key); 'hermes-core replay' works without one",
    })
    return checks


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check the home folder, config, plugins, state.db and the API key."""
    checks = run_checks()
    if as_json:
        echo_json(checks)
    else:
        for c in checks:
            mark = click.style("ok  ", fg="green") if c["ok"] else click.style("FAIL", fg="red")
            if c["ok"] and c.get("warning"):
                mark = click.style("warn", fg="yellow")
            click.echo(f"[{mark}] {c['name']}: {c['detail']}")
    if not all(c["ok"] for c in checks):
        raise SystemExit(1)
