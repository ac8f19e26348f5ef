"""``hermes-core replay`` (built-in plugin ``replay``): run a recorded conversation (JSONL) through
the configured plugins, offline, and print what each plugin did per turn.

The replay itself is the kernel's library :mod:`hermes_core.replay` (the plugin-author kit's
:mod:`hermes_core.testing.replaying` uses it too); this plugin is only the command, in
:mod:`.commands`. Loading the plugin imports only this module: the command is imported when the
command line asks for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_core import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(register: Callable[[Any], None]) -> None:
    from .commands import replay

    register(replay)
