"""``hermes-core doctor``: what is set up, what is broken, and how to fix it."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import click

from ._common import echo_json, load_host

__all__ = ["doctor", "run_checks"]


def _check_state_db(path: Any) -> dict[str, Any]:
    if not path.exists():
        return {"name": "state.db", "ok": True, "detail": f"{path} not created yet"}
    try:
        # Read-only: doctor must never modify, let alone overwrite, a damaged database.
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            result = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return {
            "name": "state.db",
            "ok": False,
            "detail": f"{path} cannot be read as SQLite ({exc}). It was left untouched: move it "
            "aside (it is your session history) and hermes-core will start a new one",
        }
    ok = result == "ok"
    detail = f"{path}: integrity ok" if ok else f"{path}: integrity check failed: {result}"
    if ok:
        ok, detail = _check_archive_identity(path, detail)
    return {"name": "state.db", "ok": ok, "detail": detail}


def _check_archive_identity(path: Any, detail: str) -> tuple[bool, str]:
    """Is the (sound) file a session archive this version can open? Read-only, like the rest."""
    from ..plugins.memory.session_archive.schema import APPLICATION_ID, LATEST_VERSION

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
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
    checks.append(_check_state_db(home / "state.db"))
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
