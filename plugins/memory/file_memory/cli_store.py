"""Opening the file memory's store for a command: ``hermes-core memory ...`` and its history
commands share it. The configured limits apply; ``--user`` opens that user's store; the database
with ``storage.url``; refused, saying how to enable it, when the plugin is disabled. ``memory
users`` lists the users with a memory of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from . import FileMemoryConfig, MemoryStore

__all__ = ["PLUGIN", "USER_OPTION", "open_for_command", "users_for_command", "whose"]

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
