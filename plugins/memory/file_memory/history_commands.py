"""``hermes-core memory history | rollback | curate | pin | unpin | pins``.

A thin layer over the file memory's library: :mod:`.history` (versions), :mod:`.versions`
(rollback), :mod:`.curator` (proposals) and :mod:`.pins`. Registered on the ``memory`` group by
:mod:`.memory_cmd`.
"""

from __future__ import annotations

import datetime
from typing import Any

import click

from hermes_core.commands import echo_json, warn

from .cli_store import open_for_command

__all__ = ["COMMANDS"]

_TARGETS = click.Choice(["memory", "user"])


def _store() -> Any:
    return open_for_command()


def _refusal(exc: Exception) -> click.ClickException:
    return click.ClickException(getattr(exc, "message", None) or str(exc))


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: object, width: int = 70) -> str:
    value = str(text).replace("\n", " ")
    return value if len(value) <= width else value[: width - 3] + "..."


@click.command("history")
@click.option("--target", type=_TARGETS, default=None, help="Only versions touching one store.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Show only the newest N versions.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the versions as JSON (with each store's text after the version).")
def history(target: str | None, limit: int | None, as_json: bool) -> None:
    """List the recorded versions of MEMORY.md / USER.md, oldest first.

    Each version says what changed, who changed it (assistant_tool, memory_review, memory_flush,
    cli, curator), in which session and tool call, and when. Roll back with
    'hermes-core memory rollback VERSION'.
    """
    store, _settings = _store()
    if store.history is None:
        raise click.ClickException("the memory history is turned off (file_memory.history_limit:"
                                   " 0); set a limit to start recording versions")
    versions = store.history.read()
    if target is not None:
        versions = [v for v in versions if target in v.stores]
    if limit is not None:
        versions = versions[-limit:]
    if as_json:
        echo_json([v.to_dict() for v in versions])
        return
    if not versions:
        click.echo("No versions recorded yet.")
        return
    for v in versions:
        where = f" session {v.session_id}" if v.session_id else ""
        call = f" call {v.message_id}" if v.message_id else ""
        extra = f" (restores {v.restores})" if v.restores is not None else ""
        mark = " [redacted by forget]" if v.redacted else ""
        click.echo(f"{v.version:>5}  {_when(v.time)}  {v.action}{extra}  "
                   f"{'+'.join(v.targets)}  by {v.origin}{where}{call}{mark}")
        for change in v.changes:
            old, new = change.get("old"), change.get("new")
            if change.get("action") == "forget":
                click.echo(f"         forgot {change.get('entries')} entr"
                           f"{'y' if change.get('entries') == 1 else 'ies'} in "
                           f"{change.get('target')}")
                continue
            if old:
                click.echo(f"         - {_short(old)}")
            if new:
                click.echo(f"         + {_short(new)}")
            if change.get("reason"):
                click.echo(f"           ({change['reason']})")


@click.command("rollback")
@click.argument("version", type=int)
def rollback(version: int) -> None:
    """Restore MEMORY.md and USER.md exactly as they were right after VERSION.

    The rollback is itself a new version (so it can be undone the same way). The restored text
    must fit today's limits and pass the threat scan; otherwise nothing changes.
    """
    from .errors import MemoryRefused
    from .history import Provenance
    from .versions import rollback as do_rollback

    store, _settings = _store()
    try:
        result = do_rollback(store, version, by=Provenance("cli"))
    except MemoryRefused as exc:
        raise _refusal(exc) from None
    if result.version is None:
        click.echo(f"The stores already are as they were after version {version}; nothing "
                   "changed.")
        return
    click.echo(f"Restored {', '.join(store.path(t).name for t in result.targets)} to version "
               f"{version}; recorded as version {result.version}.")
    if result.redacted:
        warn(f"version {version} had entries removed by 'forget'; they were not restored")


def _print_proposal(proposal: Any, store: Any) -> None:
    name = store.path(proposal.target).name
    click.echo(f"{name}: {proposal.size_before:,} -> {proposal.size_after:,}/"
               f"{proposal.limit:,} chars ({len(proposal.changes)} change"
               f"{'' if len(proposal.changes) == 1 else 's'})")
    if not proposal.changes:
        click.echo("  nothing to change")
    for change in proposal.changes:
        refs = ", ".join(str(n) for n in change.entries)
        click.echo(f"  {change.kind} entr{'y' if len(change.entries) == 1 else 'ies'} {refs}: "
                   f"{change.reason}")
        for old in change.old:
            click.echo(f"    - {_short(old)}")
        if change.new:
            click.echo(f"    + {_short(change.new)}")
    for pair in proposal.related:
        click.echo(f"  related: entries {pair[0]} and {pair[1]} overlap but each says something "
                   "the other does not (kept; --model can merge them)")
    for note in proposal.notes:
        click.echo(f"  note: {note}")


@click.command("curate")
@click.option("--target", type=_TARGETS, default=None, help="Curate one store (default: both).")
@click.option("--apply", "do_apply", is_flag=True,
              help="Write the proposal (one version per store; undo with 'memory rollback').")
@click.option("--model", "use_model", is_flag=True,
              help="Also let the auxiliary model merge and shorten entries (needs llm.* set).")
@click.option("--json", "as_json", is_flag=True, help="Print the proposals as JSON.")
def curate(target: str | None, do_apply: bool, use_model: bool, as_json: bool) -> None:
    """Propose a cleaner MEMORY.md / USER.md: duplicates, near duplicates, superseded facts.

    Prints a diff with one reason per change and changes nothing unless --apply is given.
    Pinned entries ('memory pin') are never dropped or rewritten.
    """
    from .curator import apply_proposal, model_changes, propose
    from .errors import MemoryRefused
    from .history import Provenance
    from .pins import pinned_entries

    store, settings = _store()
    options = settings.curator
    out: dict[str, Any] = {}
    proposals = []
    try:
        for name in [target] if target else ["memory", "user"]:
            proposal = propose(store, name, target_ratio=options.target_ratio,
                               near_duplicate=options.near_duplicate)
            if use_model:
                proposal = model_changes(proposal, _aux_llm(), timeout=120.0,
                                         pins=pinned_entries(store, name))
            proposals.append(proposal)
        for proposal in proposals:
            entry = proposal.to_dict()
            entry["applied"] = False
            if do_apply:
                result = apply_proposal(store, proposal, by=Provenance("curator"))
                entry["applied"] = result is not None
                if result is not None and store.history is not None:
                    entry["version"] = store.history.read()[-1].version
            out[proposal.target] = entry
    except MemoryRefused as exc:
        raise _refusal(exc) from None
    if as_json:
        echo_json(out)
        return
    for proposal in proposals:
        _print_proposal(proposal, store)
        info = out[proposal.target]
        if info["applied"]:
            click.echo(f"  applied as version {info.get('version')}")
    if not do_apply and any(p.changes for p in proposals):
        click.echo("Nothing was changed; run again with --apply to write this.")


def _aux_llm() -> Any:
    from hermes_core.config import load_config
    from hermes_core.llm import AnthropicLLM

    core = load_config().core
    return AnthropicLLM.from_config(core, model=core.llm.auxiliary_model or core.llm.model)


@click.command("pin")
@click.option("--target", type=_TARGETS, default="memory", show_default=True)
@click.argument("text")
def pin(target: str, text: str) -> None:
    """Pin the entry containing TEXT: the curator will never drop or rewrite it."""
    from .errors import MemoryRefused
    from .pins import pin as do_pin

    store, _settings = _store()
    try:
        entry = do_pin(store, target, text)
    except MemoryRefused as exc:
        raise _refusal(exc) from None
    click.echo(f"Pinned in {store.path(target).name}: {_short(entry)}")


@click.command("unpin")
@click.option("--target", type=_TARGETS, default="memory", show_default=True)
@click.argument("text")
def unpin(target: str, text: str) -> None:
    """Remove the pin of the entry containing TEXT."""
    from .errors import MemoryRefused
    from .pins import unpin as do_unpin

    store, _settings = _store()
    try:
        gone = do_unpin(store, target, text)
    except MemoryRefused as exc:
        raise _refusal(exc) from None
    for entry in gone:
        click.echo(f"Unpinned: {_short(entry)}")


@click.command("pins")
@click.option("--json", "as_json", is_flag=True, help="Print the pins as JSON.")
def pins(as_json: bool) -> None:
    """List pinned entries (a pin whose entry was since changed is shown as stale)."""
    from .pins import read_pins

    store, _settings = _store()
    listed = read_pins(store)
    rows = []
    for target, texts in listed.items():
        live = set(store.read(target).entries) if target in ("memory", "user") else set()
        rows += [{"target": target, "entry": t, "stale": t not in live} for t in texts]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No pinned entries.")
    for row in rows:
        click.echo(f"{row['target']}: {_short(row['entry'])}"
                   + ("  [stale: the entry changed]" if row["stale"] else ""))


COMMANDS = [history, rollback, curate, pin, unpin, pins]
