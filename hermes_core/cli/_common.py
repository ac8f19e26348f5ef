"""Helpers shared by the sub-commands."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ._command_index import remember_commands

if TYPE_CHECKING:
    from ..config import LoadedConfig
    from ..host import PluginHost
    from ..storage.transfer import CopyProgress

__all__ = ["echo_json", "load_config_or_defaults", "load_host", "progress_bars", "warn"]


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
              warn_config: bool = True, config: LoadedConfig | None = None) -> PluginHost:
    """Load every plugin; plugin failures are kept in the records, not logged to the terminal.

    ``config``: load with this config instead of reading config.yaml."""
    from ..config import load_config
    from ..host import PluginHost

    if config is not None:
        pass
    elif tolerate_bad_config:
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


@contextmanager
def progress_bars(host: PluginHost, quiet: bool) -> Iterator[CopyProgress]:
    """``progress(task, done, total)``: one rich bar per task on stderr, labelled with the plugin
    whose hook reports it (none with ``quiet``, e.g. --json, or without a terminal)."""
    console: Any = None
    if not quiet:
        from rich.console import Console

        console = Console(stderr=True)
    if console is None or not console.is_terminal:
        def silent(task: str, done: int, total: int) -> None:
            return None

        yield silent
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    tasks: dict[tuple[str, str], Any] = {}
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console) as bar:

        def progress(task: str, done: int, total: int) -> None:
            plugin = host.hooks.current_plugin() or ""
            key = (plugin, str(task))
            if key not in tasks:
                tasks[key] = bar.add_task(f"{plugin}: {task}" if plugin else task, total=None)
            bar.update(tasks[key], completed=done, total=total)

        yield progress
