"""``hermes-core doctor``: what is set up, what is broken, and how to fix it.

The kernel checks what it owns (home, config, plugins, selections, activation, API key); then
every loaded plugin checks what it keeps through the ``doctor_checks`` hook (the built-in stores
their files, a third-party plugin its own), each check labelled with its plugin. A plugin whose
hook raises, is late or answers something else is one failed check naming it; doctor goes on.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._common import echo_json, load_host

if TYPE_CHECKING:
    from ..hooks import HookOutcome
    from ..host import PluginHost

__all__ = ["activation_check", "doctor", "embedder_check", "model_check", "print_checks",
           "report_checks", "run_checks"]



def run_checks() -> list[dict[str, Any]]:
    """Each check: name, ok (bool), detail, 'warning' for problems that do not block, 'fix'
    when there is advice, and 'plugin' for the checks a plugin answered."""
    from ..paths import home_dir

    home = home_dir()
    checks = [_home_check(home)]
    config_check = _config_check()
    checks.append(config_check)
    host = load_host(tolerate_bad_config=True)
    host.check_registered()
    checks.append(_plugins_check(host))
    if config_check["ok"]:
        checks += _selection_checks(host)
    llm = host.config.core.llm
    checks.append(model_check(host, "main"))
    if llm.auxiliary_client or (llm.auxiliary_model and llm.auxiliary_model != llm.model):
        checks.append(model_check(host, "auxiliary"))
    try:
        checks.extend(plugin_checks(host, home))
    finally:
        host.hooks.close()
    return checks


def _home_check(home: Path) -> dict[str, Any]:
    writable = home.exists() and os.access(home, os.W_OK)
    if not home.exists():
        state = "will be created on first use"
    else:
        state = "writable" if writable else "NOT writable: fix its permissions"
    return {"name": "home", "ok": writable or not home.exists(), "detail": f"{home} ({state})"}


def _config_check() -> dict[str, Any]:
    from ..config import load_config
    from ..errors import HermesCoreError

    try:
        loaded = load_config()
    except HermesCoreError as exc:
        return {"name": "config", "ok": False, "detail": str(exc)}
    return {"name": "config", "ok": True,
            "detail": f"{loaded.path}" + ("" if loaded.exists else " (absent: defaults)")}


def _plugins_check(host: PluginHost) -> dict[str, Any]:
    """How many plugins loaded, are disabled or broke, with each error and warning."""
    broken = [r for r in host.records.values() if r.error]
    warned = [(r.name, w) for r in host.records.values() if not r.error for w in r.warnings]
    return {
        "name": "plugins",
        "ok": True,
        "warning": bool(broken or warned),
        "detail": f"{sum(r.enabled and not r.error for r in host.records.values())} loaded, "
        f"{sum(not r.enabled for r in host.records.values())} disabled, {len(broken)} with errors"
        + "".join(f"\n  {r.name}: {r.error}" for r in broken)
        + "".join(f"\n  {name}: warning: {w}" for name, w in warned),
    }


def _selection_checks(host: PluginHost) -> list[dict[str, Any]]:
    """The selected engine and providers exist (then: they activate), and the embedder."""
    from ..errors import HermesCoreError

    checks: list[dict[str, Any]] = []
    try:
        host.validate_config()
        checks.append({"name": "selections", "ok": True, "detail":
                       f"context.engine={host.config.core.context.engine}, memory.providers="
                       f"{host.config.core.memory.providers}"})
    except HermesCoreError as exc:
        checks.append({"name": "selections", "ok": False, "detail": str(exc)})
    else:
        checks.append(activation_check(host))
    checks.append(embedder_check(host))
    return checks


def activation_check(host: PluginHost) -> dict[str, Any]:
    """Every selected provider, the engine and the tools built as a session would (in a scratch
    home): what a session would hit."""
    errors, warnings = host.dry_activation()
    lines = [f"\n  {m}" for m in errors] + [f"\n  warning: {m}" for m in warnings]
    return {"name": "activation", "ok": not errors, "warning": bool(warnings),
            "detail": ("every selected provider, the engine and the tools start" if not errors
                       else f"{len(errors)} problem(s) a session would hit") + "".join(lines)}


def model_check(host: PluginHost, role: str) -> dict[str, Any]:
    """The model client of ``role``: it can be built, has what it needs to answer (a key), its
    model takes tools, and its context window is known (no request is sent)."""
    from ..errors import HermesCoreError
    from ..models import check_model, window_source

    name = "model" if role == "main" else "auxiliary model"
    try:
        check = check_model(host, role)
    except HermesCoreError as exc:  # an unknown or conflicting llm.client
        return {"name": name, "ok": False, "detail": str(exc)}
    source = window_source(host.config.core, model=check.model, client=host.llm(role))
    detail = f"client {check.client!r}, model {check.model!r}, context window from {source}"
    problems = [p for p in (check.unavailable, check.refused) if p]
    if check.unavailable:
        problems[0] += "; 'hermes-core replay' works without one"
    lines = "".join(f"\n  {p}" for p in problems) + "".join(
        f"\n  warning: {w}" for w in check.warnings)
    return {"name": name, "ok": check.refused is None,
            "warning": bool(check.unavailable or check.warnings), "detail": detail + lines}


def embedder_check(host: PluginHost) -> dict[str, Any]:
    """``embeddings.embedder``: which embedder semantic search uses and whether it answers (one
    short text embedded through the guard, with its deadline: a missing or corrupt model file,
    a hung or broken embedder show here), or why semantic search is off."""
    from ..embeddings import EmbeddingError, select_embedder
    from ..errors import UnknownNameError
    from ..kinds import EmbedderUnavailable

    check: dict[str, Any] = {"name": "embeddings", "ok": True}
    try:
        embedder, why = select_embedder(host.registries, host.config.core, host.home,
                                        host.config.raw)
    except (UnknownNameError, EmbedderUnavailable) as exc:
        return {**check, "ok": False, "detail": f"semantic search is off: "
                f"{str(exc).rstrip('.')}; word search still works"}
    if embedder is None:
        return {**check, "detail": f"{why}; word search works"}
    guard_log = logging.getLogger("hermes_core.embeddings")
    level = guard_log.level
    guard_log.setLevel(logging.ERROR)  # the failure is this check's detail, not a log line too
    try:
        # the first call loads the model: on a busy machine that may outlast a query's deadline
        embedder.embed(["doctor"], timeout=max(30.0, embedder.timeout))
    except EmbeddingError as exc:
        return {**check, "ok": False, "detail": str(exc)}
    finally:
        guard_log.setLevel(level)
        embedder.close()
    return {**check, "detail": f"{why}: it answers"}


def plugin_checks(host: PluginHost, home: Path) -> list[dict[str, Any]]:
    """Every loaded plugin's ``doctor_checks``, in call order, each labelled with its plugin."""
    out: list[dict[str, Any]] = []
    for outcome in host.hooks.doctor_checks(home=home, config=host.config):
        if not outcome.ok:
            out.append(_failed(host, outcome))
            continue
        for check in outcome.value or ():
            out.append({**check.to_dict(), "plugin": outcome.plugin})
    return out


def _failed(host: PluginHost, outcome: HookOutcome) -> dict[str, Any]:
    """One failed check for a plugin whose hook raised, was late or answered something else."""
    plugin = outcome.plugin
    hook = host.hooks.doctor_checks.__name__  # named in the messages and its deadline key
    if outcome.status in ("timed_out", "queued"):
        seconds = host.config.core.hooks.timeout(hook)
        what = (f"did not answer within {seconds:g} s (hooks.timeouts.{hook}); its checks are "
                "missing")
    elif outcome.status == "bad_return":
        what = f"answered something else: {outcome.error}"
    else:
        error = outcome.error
        what = f"raised {type(error).__name__}: {error}" if error is not None else "failed"
    return {"name": f"{plugin}: {hook}", "ok": False, "warning": False, "plugin": plugin,
            "detail": f"plugin {plugin!r}: its {hook} hook {what}",
            "fix": f"report it to the plugin's authors; 'hermes-core plugins disable {plugin}' "
                   "turns the plugin off"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check the home folder, config, plugins, state.db and the API key.

    Then every loaded plugin checks what it keeps (the built-ins: state.db, MEMORY.md, USER.md),
    each check labelled with its plugin.
    """
    report_checks(run_checks(), as_json)


def report_checks(checks: list[dict[str, Any]], as_json: bool) -> None:
    """Print the checks (JSON, or one line each); exit 1 when one failed."""
    if as_json:
        echo_json(checks)
    else:
        print_checks(checks)
    if not all(c["ok"] for c in checks):
        raise SystemExit(1)


def print_checks(checks: list[dict[str, Any]]) -> None:
    """One line per check, ``[ok  ]``/``[warn]``/``[FAIL]``, and its fix when it has one."""
    for c in checks:
        mark = click.style("ok  ", fg="green") if c["ok"] else click.style("FAIL", fg="red")
        if c["ok"] and c.get("warning"):
            mark = click.style("warn", fg="yellow")
        label = f"{c['plugin']} / {c['name']}" if c.get("plugin") else c["name"]
        if c.get("plugin") and c["name"].startswith(f"{c['plugin']}: "):
            label = c["name"]
        click.echo(f"[{mark}] {label}: {c['detail']}")
        if c.get("fix"):
            click.echo(f"       fix: {c['fix']}")
