"""``hermes-core plugins new`` (built-in plugin ``scaffold``): create a plugin package (pyproject,
module, config model, tests on the conformance suites, README) whose own tests pass at once.

The command joins the kernel's ``plugins`` group (``register(command, group="plugins")``);
:mod:`.build` writes the package (:func:`~.build.scaffold`), :mod:`.commands` is the command.
Loading the plugin imports only this module: the command is imported when the command line asks
for it.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    from .commands import new

    register(new, group="plugins")
