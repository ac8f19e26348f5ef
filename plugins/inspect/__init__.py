"""``hermes-core inspect`` (built-in plugin ``inspect``): a local page and a REST API over the
configured memory stack: MEMORY.md/USER.md with their history, rollback and pins, the session
archive with its search, what the providers would recall, the plugins' state, doctor, forget.

FastAPI is an optional extra (``pip install 'hermes-core-kernel[inspect]'``); without it the command
says how to install it. User documentation: ``docs/inspect.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_core import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(register: Callable[[Any], None]) -> None:
    from .commands import inspect_group

    register(inspect_group)
