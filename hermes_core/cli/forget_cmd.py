"""``hermes-core forget TEXT``: delete what every memory provider keeps about TEXT.

Loads the plugins, activates the memory providers of ``memory.providers`` and the context
engine of ``context.engine`` (the lossless engine archives compacted turns), asks each through
the ``forget`` hook what it would delete (a dry run), prints it, then - unless ``--dry-run`` -
asks the user to confirm (``--yes`` confirms ahead; without a terminal it is required) and asks
each provider to delete it. A subject that matches most of what a provider holds (say "the") is
refused unless ``--force``. A provider that raises is reported by name and the others still
run; each provider's deletion is all-or-nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
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
                         "items": [], "cannot_delete": None, "notes": [], "total": None})
            continue
        report = outcome.value
        if report is None:
            continue
        if not isinstance(report, ForgetReport):
            rows.append({"provider": plugin, "error": f"forget returned {type(report).__name__}"
                         ", not a ForgetReport", "matched": 0, "deleted": 0,
                         "dry_run": dry_run, "items": [], "cannot_delete": None, "notes": [],
                         "total": None})
            continue
        rows.append({"provider": report.provider, "error": None, "matched": report.matched,
                     "deleted": report.deleted, "dry_run": report.dry_run,
                     "items": list(report.items), "cannot_delete": report.cannot_delete,
                     "notes": list(report.notes), "total": report.total})
    return rows


def _print(rows: list[dict[str, Any]], verb: str) -> None:
    for row in rows:
        if row["error"]:
            click.echo(f"{row['provider']}: FAILED, nothing deleted there: {row['error']}")
            continue
        count = row["deleted"] if verb == "deleted" else row["matched"]
        of = f" of {row['total']}" if row.get("total") is not None and verb != "deleted" else ""
        click.echo(f"{row['provider']}: {verb} {count}{of} item(s)")
        for item in row["items"]:
            click.echo(f"  - {item}")
        if row["cannot_delete"]:
            click.echo(f"  cannot delete here: {row['cannot_delete']}")
        for note in row["notes"]:
            click.echo(f"  note: {note}")


#: a shorter subject would match almost everything
MIN_SUBJECT = 3
#: a subject matching more than this share of a provider's items (and at least BROAD_MIN of
#: them) is refused without ``--force``: "the" is rarely what the user means to forget
BROAD_SHARE = 0.5
BROAD_MIN = 10


def too_broad(plan: list[dict[str, Any]]) -> list[str]:
    """One line per provider where the plan would delete most of what it holds."""
    lines = []
    for row in plan:
        total, matched = row.get("total"), row["matched"]
        if total and matched >= BROAD_MIN and matched > BROAD_SHARE * total:
            lines.append(f"{row['provider']}: {matched} of {total} items "
                         f"({100 * matched // total}%)")
    return lines


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


def run_forget(subject: str, *, dry_run: bool, scope: str = "all", force: bool = False,
               confirm: Callable[[list[dict[str, Any]]], bool] | None = None) -> dict[str, Any]:
    """The whole command as a library call: the plan, and (unless ``dry_run``) the result.

    Before deleting, a plan that would delete most of a provider's items raises
    :class:`HermesCoreError` unless ``force``, and ``confirm(plan)`` (when given) must say yes;
    a refusal leaves everything stored as it was (``result`` is None, ``cancelled`` True)."""
    from ..errors import HermesCoreError

    subject = _check_subject(subject)
    cancelled = False
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
            broad = too_broad(plan)
            if broad and not force:
                raise HermesCoreError(
                    f"{subject!r} matches most of what is stored ({'; '.join(broad)}); nothing "
                    "was deleted. Give a more specific phrase (check it with --dry-run), or add "
                    "--force if you really mean to delete all of that")
            if confirm is not None and not confirm(plan):
                cancelled = True
            else:
                from ..storage.erasures import forget_noted, note_forget, tell_running_servers

                home, url = host.home, host.config.core.storage.url
                note = note_forget(subject, scope, home=home, storage_url=url)  # turns in flight
                result = _rows(host, _forget_hook(host, subject, scope, False), False)
                tell_running_servers("forget", home=home, storage_url=url)
                forget_noted(note, home=home, storage_url=url)
    finally:
        host.shutdown()
    return {"subject": subject, "dry_run": dry_run, "plan": plan, "result": result,
            "cancelled": cancelled}


@click.command("forget")
@click.argument("text")
@click.option("--dry-run", is_flag=True, help="Only show what each provider would delete.")
@click.option("--yes", "-y", is_flag=True,
              help="Delete without asking (required when stdin is not a terminal).")
@click.option("--force", is_flag=True,
              help="Delete even when TEXT matches most of what a provider holds.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the result as JSON.")
def forget(text: str, dry_run: bool, yes: bool, force: bool, as_json: bool) -> None:
    """Delete everything the memory providers keep that mentions TEXT.

    Shows what each provider would delete and asks before deleting it (file memory entries and
    their history, archived messages and their search index, skills, and what Honcho or
    Hindsight allow); there is no undo. Matching ignores case and runs of whitespace. A TEXT
    matching most of a provider's items is refused unless --force.
    """
    out = run_forget(text, dry_run=dry_run, force=force,
                     confirm=None if yes else _ask(as_json))
    if out["cancelled"]:
        click.echo("Nothing was deleted.", err=as_json)
        if as_json:
            echo_json(out)
        return
    rows = out["result"] if out["result"] is not None else out["plan"]
    failed = [r for r in rows if r["error"]]
    if as_json:
        echo_json(out)
    else:
        if not any(r["matched"] for r in out["plan"]) and not failed:
            click.echo(f"Nothing mentions {out['subject']!r} in any provider; nothing was "
                       "deleted.")
        else:
            if out["result"] is None or yes:  # the confirmation already showed the plan
                _print(out["plan"], "would delete")
            if out["result"] is not None:
                click.echo("")
                _print(out["result"], "deleted")
    if failed:
        raise SystemExit(1)


def _ask(as_json: bool) -> Callable[[list[dict[str, Any]]], bool]:
    """The confirmation: the plan, then a yes/no question on the terminal; without a terminal
    (a script, a pipe) a clear error, since nobody can answer."""
    from ..errors import HermesCoreError

    def confirm(plan: list[dict[str, Any]]) -> bool:
        count = sum(r["matched"] for r in plan)
        if not sys.stdin.isatty():
            raise HermesCoreError(
                f"forget would delete {count} item(s) and cannot ask for confirmation (stdin is "
                "not a terminal); nothing was deleted. Add --yes to delete without asking, or "
                "--dry-run to see the list")
        _print(plan, "would delete")
        return click.confirm(f"Delete these {count} item(s)? This cannot be undone",
                             default=False, err=as_json)

    return confirm
