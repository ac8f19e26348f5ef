"""Opening the file memory's store for a command: ``hermes-core memory ...`` and its history
commands share it. The configured limits apply; ``--user`` opens that user's store; the database
with ``storage.url``; refused, saying how to enable it, when the plugin is disabled."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from . import FileMemoryConfig, MemoryStore

__all__ = ["PLUGIN", "open_for_command"]

PLUGIN = "file_memory"


def open_for_command(user: str | None = None) -> tuple[MemoryStore, FileMemoryConfig]:
    """The store with the configured limits (the user's with ``--user``, in the database with
    ``storage.url``); refuses when the plugin is disabled."""
    from hermes_core.config import load_config, validate_section
    from hermes_core.loader import BUILTIN_PLUGINS, Candidate, allowed_names, blocked_names, is_blocked
    from hermes_core.paths import home_dir

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
    from hermes_core.users import UserKeyError, check_user_key

    from . import FileMemoryConfig
    from .backend import open_store

    settings = validate_section(config, PLUGIN, FileMemoryConfig, plugin=PLUGIN)
    try:
        if user is not None:  # "" is a mistake (an unset variable), not the shared memory
            check_user_key(user)
        store = open_store(settings, home_dir(), config.core.storage.url, user=user)
    except UserKeyError as exc:
        raise click.BadParameter(str(exc), param_hint="--user") from None
    return store, settings
