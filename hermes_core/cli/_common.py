"""Helpers shared by the sub-commands."""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from ._command_index import remember_commands

if TYPE_CHECKING:
    from ..config import LoadedConfig
    from ..host import PluginHost

__all__ = ["echo_json", "load_config_or_defaults", "load_host", "warn"]


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def warn(message: str) -> None:
    click.echo(click.style("warning: ", fg="yellow") + message, err=True)


def load_config_or_defaults() -> tuple[LoadedConfig, str | None]:
    """The config, or the defaults plus the error text when the file is invalid.

    Commands that must keep working with a broken config (listing plugins, doctor) use this.
    """
    from ..config import load_config, parse_config_text
    from ..errors import ConfigError
    from ..paths import config_path

    try:
        return load_config(), None
    except ConfigError as exc:
        return parse_config_text("", config_path()), str(exc)


def load_host(*, tolerate_bad_config: bool = False, quiet: bool = True,
              warn_config: bool = True) -> PluginHost:
    """Load every plugin; plugin failures are kept in the records, not logged to the terminal."""
    from ..config import load_config
    from ..host import PluginHost

    if tolerate_bad_config:
        config, error = load_config_or_defaults()
        if error and warn_config:
            warn(f"config ignored: {error}")
    else:
        config = load_config()
    logger = logging.getLogger("hermes_core")
    level = logger.level
    if quiet and not logger.isEnabledFor(logging.DEBUG):
        logger.setLevel(logging.ERROR + 10)  # failures are shown as records, not as log lines
    try:
        host = PluginHost.load(config=config)
    finally:
        logger.setLevel(level)
    remember_commands(host)  # keeps --help's list of plugin commands current
    return host


def exit_code(ok: bool) -> None:
    if not ok:
        sys.exit(1)
