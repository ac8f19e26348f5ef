"""``hermes-core forget TEXT``: delete what every memory provider keeps about TEXT.

Loads the plugins, activates the memory providers of ``memory.providers`` and the context
engine of ``context.engine`` (the lossless engine archives compacted turns), asks each through
the ``forget`` hook what it would delete (a dry run), prints it, then - unless ``--dry-run`` -
asks each to delete it. A provider that raises is reported by name and the others still run;
each provider's deletion is all-or-nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ._common import echo_json, load_host, warn

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["forget"]


def _forget_hook(host: PluginHost, subject: str, scope: str, dry_run: bool) -> list[Any]:
    return host.hooks.forget(subject=subject, scope=scope, dry_run=dry_run)


def _rows(host: Any, outcomes: list[Any], dry_run: bool) -> list[dict[str, Any]]:
    from ..types import ForgetReport

    rows = []
    for outcome in outcomes:
        plugin = host.instance_name(outcome.plugin)
        if outcome.error is not None:
            rows.append({"provider": plugin, "error": f"{type(outcome.error).__name__}: "
                         f"{outcome.error}", "matched": 0, "deleted": 0, "dry_run": dry_run,
                         "items": [], "cannot_delete": None, "notes": []})
            continue
        report = outcome.value
        if report is None:
            continue
        if not isinstance(report, ForgetReport):
            rows.append({"provider": plugin, "error": f"forget returned {type(report).__name__}"
                         ", not a ForgetReport", "matched": 0, "deleted": 0,
                         "dry_run": dry_run, "items": [], "cannot_delete": None, "notes": []})
            continue
        rows.append({"provider": report.provider, "error": None, "matched": report.matched,
                     "deleted": report.deleted, "dry_run": report.dry_run,
                     "items": list(report.items), "cannot_delete": report.cannot_delete,
                     "notes": list(report.notes)})
    return rows


def _print(rows: list[dict[str, Any]], verb: str) -> None:
    for row in rows:
        if row["error"]:
            click.echo(f"{row['provider']}: FAILED, nothing deleted there: {row['error']}")
            continue
        count = row["deleted"] if verb == "deleted" else row["matched"]
        click.echo(f"{row['provider']}: {verb} {count} item(s)")
        for item in row["items"]:
            click.echo(f"  - {item}")
        if row["cannot_delete"]:
            click.echo(f"  cannot delete here: {row['cannot_delete']}")
        for note in row["notes"]:
            click.echo(f"  note: {note}")


#: a shorter subject would match almost everything
MIN_SUBJECT = 3


def _check_subject(subject: object) -> str:
    """The stripped subject, or a :class:`HermesCoreError` saying what is wrong with it."""
    from ..errors import HermesCoreError

    if not isinstance(subject, str) or not subject.strip():
        raise HermesCoreError("the text to forget is empty; give a word or phrase, e.g. "
                              "hermes-core forget \"Lisbon\"")
    text = subject.strip()
    if len(text) < MIN_SUBJECT:
        raise HermesCoreError(f"{text!r} is too short to forget safely (it would match almost "
                              f"everything); give at least {MIN_SUBJECT} characters")
    return text


def run_forget(subject: str, *, dry_run: bool, scope: str = "all") -> dict[str, Any]:
    """The whole command as a library call: the plan, and (unless ``dry_run``) the result."""
    subject = _check_subject(subject)
    host = load_host()
    try:
        host.activate_memory_providers()
        engine = host.config.core.context.engine
        try:
            host.activate("context-engine", engine, config_key="context.engine")
        except Exception as exc:  # the engine is optional here; its own error is reported
            warn(f"context engine {engine!r} not started ({exc}); its archive was not searched")
        plan = _rows(host, _forget_hook(host, subject, scope, True), True)
        result = None
        if not dry_run and any(r["matched"] for r in plan):
            result = _rows(host, _forget_hook(host, subject, scope, False), False)
            from ..storage.erasures import tell_running_servers

            tell_running_servers("forget", home=host.home,
                                 storage_url=host.config.core.storage.url)
    finally:
        host.shutdown()
    return {"subject": subject, "dry_run": dry_run, "plan": plan, "result": result}


@click.command("forget")
@click.argument("text")
@click.option("--dry-run", is_flag=True, help="Only show what each provider would delete.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the result as JSON.")
def forget(text: str, dry_run: bool, as_json: bool) -> None:
    """Delete everything the memory providers keep that mentions TEXT.

    Shows what each provider would delete, then deletes it (file memory entries and their
    history, archived messages and their search index, skills, and what Honcho or Hindsight
    allow). Matching ignores case and runs of whitespace.
    """
    out = run_forget(text, dry_run=dry_run)
    rows = out["result"] if out["result"] is not None else out["plan"]
    failed = [r for r in rows if r["error"]]
    if as_json:
        echo_json(out)
    else:
        if not any(r["matched"] for r in out["plan"]) and not failed:
            click.echo(f"Nothing mentions {out['subject']!r} in any provider; nothing was "
                       "deleted.")
        else:
            _print(out["plan"], "would delete")
            if out["result"] is not None:
                click.echo("")
                _print(out["result"], "deleted")
    if failed:
        raise SystemExit(1)
