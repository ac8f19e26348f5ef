"""What a plugin's ``register_commands`` command uses: the loaded host, JSON output, warnings,
progress bars.

A plugin command is a plain click command; these helpers keep it consistent with the kernel's::

    import click
    from hermes_core import hookimpl
    from hermes_core.commands import echo_json, load_host

    @click.command("notes")
    @click.option("--json", "as_json", is_flag=True)
    def notes(as_json):
        host = load_host()
        ...

    @hookimpl
    def register_commands(register):
        register(notes)
"""

from __future__ import annotations

from .cli._common import echo_json, load_host, progress_bars, warn

__all__ = ["echo_json", "load_host", "progress_bars", "warn"]
