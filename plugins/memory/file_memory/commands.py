"""``hermes-core memory``: show and change MEMORY.md / USER.md from the shell.

A thin layer over the file memory's store (``hermes_core.plugins.memory.file_memory``): the same
limits (from the ``file_memory`` config section), the same validation and threat scan, the same
locking as the ``memory`` tool. A refusal exits non-zero with the reason. ``memory review`` runs
the background memory review (the ``memory_review`` plugin's ``review_session``) over a session
read from the session archive.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from hermes_core.commands import echo_json, warn
from hermes_core.private import write_private_text

from .history_commands import COMMANDS, open_for_command
from .history_commands import USER_OPTION as _USER

if TYPE_CHECKING:
    from . import MemoryStore
    from .store import WriteResult

__all__ = ["memory"]

_TARGET = click.option(
    "--target",
    type=click.Choice(["memory", "user"]),
    default="memory",
    show_default=True,
    help="memory = the agent's notes (MEMORY.md), user = the user's profile (USER.md).",
)


def _run(action: Any) -> WriteResult:
    """Call ``action``; turn a refusal into a ClickException carrying its reason."""
    from .errors import AmbiguousMatch, MemoryRefused

    try:
        result: WriteResult = action()
    except MemoryRefused as exc:
        message = exc.message
        if isinstance(exc, AmbiguousMatch):
            message += "\nMatching entries:\n" + "\n".join(f"  - {m}" for m in exc.matches)
        raise click.ClickException(message) from None
    return result


def _count(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _report(result: WriteResult, store: MemoryStore, done: str) -> None:
    name = store.path(result.target).name
    if not result.written:
        click.echo(f"{name}: entry already stored; nothing changed [{result.usage} chars].")
        return
    click.echo(f"{name}: {done} [{result.usage} chars, {_count(len(result.entries))}].")
    if result.backup is not None:
        warn(
            f"{name} had been edited outside hermes-core; its previous text was saved to "
            f"{result.backup} before it was rewritten"
        )


@click.group()
def memory() -> None:
    """Show and change the built-in file memory (MEMORY.md and USER.md).

    Changes take effect in the system prompt from the next session; running sessions keep
    their frozen snapshot.
    """


@memory.command("show")
@click.option(
    "--target",
    type=click.Choice(["memory", "user"]),
    default=None,
    help="Show one store only (default: both).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object keyed by target.")
@_USER
def show(target: str | None, as_json: bool, user: str | None) -> None:
    """Print the entries of MEMORY.md and USER.md with their usage."""
    from .entries import joined_size, percent, usage_label

    store, _settings = open_for_command(user)
    out: dict[str, Any] = {}
    for name in [target] if target else ["memory", "user"]:
        state = store.read(name)
        size, limit = joined_size(state.entries), store.limit(name)
        out[name] = {
            "path": str(store.path(name)),
            "entries": state.entries,
            "entry_count": len(state.entries),
            "chars": size,
            "limit": limit,
            "percent": percent(size, limit),
            "usage": usage_label(size, limit),
            "edited_outside": state.edited,
            "problem": state.problem,
        }
    if as_json:
        echo_json(out)
        return
    for name, info in out.items():
        if info["problem"]:
            warn(f"{info['problem']}; it is treated as empty and writes to it are refused")
        click.echo(f"{info['path']}  [{info['usage']} chars, {_count(info['entry_count'])}]")
        if not info["entries"]:
            click.echo("  (empty)")
        for number, entry in enumerate(info["entries"], start=1):
            lines = entry.split("\n")
            click.echo(f"  {number:>2}. {lines[0]}")
            for line in lines[1:]:
                click.echo(f"      {line}")
        if name == "memory" and len(out) > 1:
            click.echo("")


@memory.command("users")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def users(as_json: bool) -> None:
    """List the users with a memory of their own (memory.scope: user), by key.

    A user's folder is named by the key with each uppercase letter written as ^ and its
    lowercase (Alice: memories/users/^alice); one still under its old name is marked and is
    renamed when that user's memory is next opened."""
    from .history_commands import users_for_command

    rows = users_for_command()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No user has a memory of its own (memory.scope: user gives each one).")
    for row in rows:
        note = "  (old folder name: renamed when next opened)" if row["old_name"] else ""
        if row["both_names"]:
            note = (f"  (ALSO under its old folder name {row['user']}: both exist, so this memory "
                    "cannot be opened; 'hermes-core doctor' says what to do)")
        click.echo(f"{row['user']}  {row['where']}{note}")


@memory.command("add")
@_TARGET
@click.argument("text")
@_USER
def add(target: str, text: str, user: str | None) -> None:
    """Add TEXT as a new entry."""
    store, _settings = open_for_command(user)
    _report(_run(lambda: store.add(target, text)), store, "entry added")


@memory.command("replace")
@_TARGET
@click.argument("old_text")
@click.argument("new_text")
@_USER
def replace(target: str, old_text: str, new_text: str, user: str | None) -> None:
    """Replace the entry containing OLD_TEXT (a short unique part of it) by NEW_TEXT."""
    store, _settings = open_for_command(user)
    _report(_run(lambda: store.replace(target, old_text, new_text)), store, "entry replaced")


@memory.command("remove")
@_TARGET
@click.argument("old_text")
@_USER
def remove(target: str, old_text: str, user: str | None) -> None:
    """Remove the entry containing OLD_TEXT (a short unique part of it)."""
    store, _settings = open_for_command(user)
    _report(_run(lambda: store.remove(target, old_text)), store, "entry removed")


@memory.command("edit")
@_TARGET
@_USER
def edit(target: str, user: str | None) -> None:
    """Edit a store in $EDITOR; it is checked before it is saved.

    Entries are separated by a line holding only '§'. The same rules as the memory tool apply
    (size limit, threat scan); a rejected edit is kept in a file next to the store so no typing
    is lost.
    """
    from .entries import canonical_text, parse_entries
    from .ops import check_entries

    store, _settings = open_for_command(user)
    path = store.path(target)
    state = store.read(target)
    if state.problem is not None:
        raise click.ClickException(
            f"{state.problem}. Fix or move the file by hand (a text editor shows its raw bytes); "
            "it was not changed."
        )
    before = canonical_text(state.entries)
    edited = click.edit(before + "\n" if before else "", extension=".md", require_save=True)
    if edited is None:
        click.echo("No changes (the editor was closed without saving).")
        return
    entries = parse_entries(edited)
    if entries == state.entries and not state.edited:
        click.echo(f"{path.name}: no changes.")
        return
    problems = check_entries(entries, limit=store.limit(target))
    if problems:
        rescue = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.rejected")
        kept = ""
        try:
            write_private_text(rescue, edited)
            kept = f"\nYour edited text was kept in {rescue}."
        except OSError as exc:
            kept = f"\n(Your edited text could not be kept: {exc.strerror or exc}.)"
        raise click.ClickException(
            f"{path.name} was not changed:\n" + "\n".join(f"  - {p}" for p in problems) + kept
        )
    _report(
        _run(lambda: store.overwrite(target, entries, expected=state.raw)), store, "saved"
    )


for _command in COMMANDS:  # history, rollback, curate, pin: in their own module
    memory.add_command(_command)
