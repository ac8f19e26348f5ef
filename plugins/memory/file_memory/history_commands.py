"""``hermes-core memory history | diff | rollback | curate | pin | unpin | pins``, and opening the
file memory's store for any ``memory`` command.

A thin layer over the file memory's library: :mod:`.history` (versions), :mod:`.versions`
(rollback, diff), :mod:`.curator` (proposals) and :mod:`.pins`. Each works on the shared memory,
or with ``--user KEY`` on that user's (the store :func:`open_for_command` opens, as for ``memory
show --user``). Registered on the ``memory`` group by :mod:`.commands`.

:func:`open_for_command` opens the store every ``memory`` command works on: the configured limits
apply; ``--user`` opens that user's store; the database with ``storage.url``; refused, saying how
to enable it, when the plugin is disabled. ``memory users`` lists the users with a memory of their
own (:func:`users_for_command`).
"""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from hermes_core.commands import echo_json, warn

if TYPE_CHECKING:
    from . import FileMemoryConfig, MemoryStore
    from .history import Version

__all__ = ["COMMANDS", "PLUGIN", "USER_OPTION", "open_for_command", "users_for_command", "whose"]

_TARGETS = click.Choice(["memory", "user"])
PLUGIN = "file_memory"

#: ``--user KEY`` of every ``memory`` command that reads or changes one memory
USER_OPTION = click.option(
    "--user", "user", default=None, metavar="KEY",
    help="The memory of one user key (memory.scope: user); default: the shared memory.",
)


def whose(user: str | None) -> str:
    """How a message names the memory a command worked on."""
    return "the shared memory" if user is None else f"the memory of user {user!r}"


def _configured() -> tuple[Any, FileMemoryConfig]:
    """The loaded configuration and the plugin's settings; refuses when it is disabled."""
    from hermes_core.config import load_config, validate_section
    from hermes_core.loader import BUILTIN_PLUGINS, Candidate, allowed_names, blocked_names, is_blocked

    from . import FileMemoryConfig

    config = load_config()
    candidate = Candidate(name=PLUGIN, source="builtin", module=BUILTIN_PLUGINS.get(PLUGIN))
    plugins_cfg = config.core.plugins
    if is_blocked(candidate, blocked_names(plugins_cfg.disabled),
                  allowed_names(plugins_cfg.enabled_only)):
        raise click.ClickException(
            f"the {PLUGIN} plugin is disabled (plugins.disabled or plugins.enabled_only in "
            f"{config.path}, or HERMES_CORE_DISABLE_PLUGINS), so its memory files are not in "
            f"use. Enable it with 'hermes-core plugins enable {PLUGIN}' first."
        )
    return config, validate_section(config, PLUGIN, FileMemoryConfig, plugin=PLUGIN)


def open_for_command(user: str | None = None) -> tuple[MemoryStore, FileMemoryConfig]:
    """The store with the configured limits (the user's with ``--user``, in the database with
    ``storage.url``); refuses when the plugin is disabled."""
    from hermes_core.paths import home_dir
    from hermes_core.users import UserKeyError, check_user_key

    from .backend import open_store

    config, settings = _configured()
    try:
        if user is not None:  # "" is a mistake (an unset variable), not the shared memory
            check_user_key(user)
        store = open_store(settings, home_dir(), config.core.storage.url, user=user)
    except UserKeyError as exc:
        raise click.BadParameter(str(exc), param_hint="--user") from None
    return store, settings


def users_for_command() -> list[dict[str, Any]]:
    """Each user with a memory of its own: ``user`` (the key) and ``where`` (its folder, or the
    database); ``old_name`` when the folder still has its old name, ``both_names`` when a folder
    under the old name exists beside the new one (an error to settle by hand). Only read:
    nothing is renamed here."""
    from hermes_core.paths import home_dir
    from hermes_core.storage import resolve_storage_url
    from hermes_core.users import user_folder_name

    from .backend import user_keys
    from .user_folders import old_named_folders, users_dir

    config, _settings = _configured()
    url = resolve_storage_url(config.core.storage.url)
    rows: list[dict[str, Any]] = []
    users = users_dir(home_dir() / "memories")
    old_names = set(old_named_folders(users)) if url is None else set()  # one listing
    for key in user_keys(home_dir(), config.core.storage.url):
        if url is not None:
            rows.append({"user": key, "where": f"{url.redacted} (owner {key!r})",
                         "old_name": False, "both_names": False})
            continue
        new = users / user_folder_name(key)
        has_new = new.is_dir()
        has_old = key in old_names
        rows.append({"user": key, "where": str(new if has_new else users / key),
                     "old_name": has_old and not has_new, "both_names": has_old and has_new})
    return rows


@contextlib.contextmanager
def _refused(user: str | None) -> Iterator[None]:
    """A refusal raised in the block, as a ClickException carrying its reason (naming the
    memory with ``--user``)."""
    from .errors import MemoryRefused

    try:
        yield
    except MemoryRefused as exc:
        message = exc.message
        if user is not None:
            # a command the message suggests is meant for the same memory
            message = f"{whose(user)}: " + re.sub(
                r"'(hermes-core memory [a-z]+)'", lambda m: f"'{m.group(1)} --user {user}'",
                message)
        raise click.ClickException(message) from None


def _no_memory_yet(store: Any) -> bool:
    """The store has no version and no entry (a user key that never had a memory)."""
    history = store.history.read() if store.history is not None else []
    return not history and not any(store.read(t).entries for t in ("memory", "user"))


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
@USER_OPTION
def history(target: str | None, limit: int | None, as_json: bool, user: str | None) -> None:
    """List the recorded versions of MEMORY.md / USER.md, oldest first.

    Each version says what changed, who changed it (assistant_tool, memory_review, memory_flush,
    cli, curator), in which session and tool call, and when. See one version's change with
    'hermes-core memory diff VERSION'; roll back with 'hermes-core memory rollback VERSION'
    (add --user KEY to each for that user's memory).
    """
    store, _settings = open_for_command(user)
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
        if user is not None and _no_memory_yet(store):
            click.echo(f"User {user!r} has no memory yet: no versions recorded.")
        else:
            click.echo(f"No versions recorded yet in {whose(user)}.")
        return
    for v in versions:
        _echo_version(v)


def _echo_version(v: Version) -> None:
    """One version of ``memory history``: its heading line, then a line or two per change."""
    where = f" session {v.session_id}" if v.session_id else ""
    call = f" call {v.message_id}" if v.message_id else ""
    extra = f" (restores {v.restores})" if v.restores is not None else ""
    mark = " [redacted by forget]" if v.redacted else ""
    click.echo(f"{v.version:>5}  {_when(v.time)}  {v.action}{extra}  "
               f"{'+'.join(v.targets)}  by {v.origin}{where}{call}{mark}")
    for change in v.changes:
        _echo_change(change)


def _echo_change(change: dict[str, Any]) -> None:
    if change.get("action") == "forget":
        click.echo(f"         forgot {change.get('entries')} entr"
                   f"{'y' if change.get('entries') == 1 else 'ies'} in "
                   f"{change.get('target')}")
        return
    old, new = change.get("old"), change.get("new")
    if old:
        click.echo(f"         - {_short(old)}")
    if new:
        click.echo(f"         + {_short(new)}")
    if change.get("reason"):
        click.echo(f"           ({change['reason']})")


@click.command("diff")
@click.argument("version", type=int)
@click.argument("other", type=int, required=False)
@click.option("--target", type=_TARGETS, default=None, help="Only one store.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list: per store that differs, target, from, to, old, new, diff.")
@USER_OPTION
def diff(version: int, other: int | None, target: str | None, as_json: bool,
         user: str | None) -> None:
    """Show what VERSION changed in MEMORY.md / USER.md, as a unified diff.

    With OTHER: how the stores differ between right after VERSION and right after OTHER.
    Read from the history ('hermes-core memory history' lists the versions); nothing changes.
    """
    from .versions import version_diff

    store, _settings = open_for_command(user)
    with _refused(user):
        diffs = version_diff(store.history, version, other,
                             (target,) if target else ("memory", "user"))
    if as_json:
        echo_json([d.to_dict() for d in diffs])
        return
    if not diffs:
        click.echo(f"No difference between versions {version} and {other}." if other is not None
                   else f"Version {version} changed nothing" + (f" in the {target} store."
                                                               if target else "."))
    for item in diffs:
        for line in item.lines:
            click.echo(line)


@click.command("rollback")
@click.argument("version", type=int)
@USER_OPTION
def rollback(version: int, user: str | None) -> None:
    """Restore MEMORY.md and USER.md exactly as they were right after VERSION.

    The rollback is itself a new version (so it can be undone the same way). The restored text
    must fit today's limits and pass the threat scan; otherwise nothing changes. With --user KEY
    only that user's memory is restored: the shared memory and other users' are not touched.
    """
    from .history import Provenance
    from .versions import rollback as do_rollback

    store, _settings = open_for_command(user)
    if user is not None and _no_memory_yet(store):
        raise click.ClickException(f"there is no version {version}: user {user!r} has no memory "
                                   "yet ('hermes-core memory users' lists the users that do)")
    with _refused(user):
        result = do_rollback(store, version, by=Provenance("cli"))
    if result.version is None:
        click.echo(f"The stores already are as they were after version {version}; nothing "
                   "changed.")
        return
    from hermes_core.storage.erasures import tell_running_servers

    tell_running_servers("memory rollback")  # running servers drop their frozen snapshots
    mine = "" if user is None else f" ({whose(user)})"
    click.echo(f"Restored {', '.join(store.path(t).name for t in result.targets)}{mine} to "
               f"version {version}; recorded as version {result.version}.")
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
@USER_OPTION
def curate(target: str | None, do_apply: bool, use_model: bool, as_json: bool,
           user: str | None) -> None:
    """Propose a cleaner MEMORY.md / USER.md: duplicates, near duplicates, superseded facts.

    Prints a diff with one reason per change and changes nothing unless --apply is given.
    Pinned entries ('memory pin') are never dropped or rewritten. --user KEY curates that
    user's memory (with that user's pins).
    """
    from .curator import apply_proposal, model_changes, propose
    from .history import Provenance
    from .pins import pinned_entries

    store, settings = open_for_command(user)
    options = settings.curator
    out: dict[str, Any] = {}
    proposals = []
    with _refused(user):
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
    """The auxiliary model client (``llm.auxiliary_client``) of this home's config."""
    from hermes_core.host import PluginHost
    from hermes_core.llm import build_llm

    host = PluginHost.load()
    try:
        return build_llm(host.registries, host.config.core, "auxiliary", config=host.config,
                         home=host.home)
    finally:
        host.shutdown()


@click.command("pin")
@click.option("--target", type=_TARGETS, default="memory", show_default=True)
@click.argument("text")
@USER_OPTION
def pin(target: str, text: str, user: str | None) -> None:
    """Pin the entry containing TEXT: the curator will never drop or rewrite it."""
    from .pins import pin as do_pin

    store, _settings = open_for_command(user)
    with _refused(user):
        entry = do_pin(store, target, text)
    click.echo(f"Pinned in {store.path(target).name}: {_short(entry)}")


@click.command("unpin")
@click.option("--target", type=_TARGETS, default="memory", show_default=True)
@click.argument("text")
@USER_OPTION
def unpin(target: str, text: str, user: str | None) -> None:
    """Remove the pin of the entry containing TEXT."""
    from .pins import unpin as do_unpin

    store, _settings = open_for_command(user)
    with _refused(user):
        gone = do_unpin(store, target, text)
    for entry in gone:
        click.echo(f"Unpinned: {_short(entry)}")


@click.command("pins")
@click.option("--json", "as_json", is_flag=True, help="Print the pins as JSON.")
@USER_OPTION
def pins(as_json: bool, user: str | None) -> None:
    """List pinned entries (a pin whose entry was since changed is shown as stale)."""
    from .pins import read_pins

    store, _settings = open_for_command(user)
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


COMMANDS = [history, diff, rollback, curate, pin, unpin, pins]
