"""The hermes-core plugin module of the bridge (entry point ``hermes_compat``).

It registers one hermes-core memory provider or context engine class per Hermes plugin found
(:mod:`.discovery`), named ``hermes-<name>``, without importing any of them; the ``hermes``
command; and ``doctor`` checks of the Hermes plugins that are selected.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl

if TYPE_CHECKING:
    from hermes_core.config import LoadedConfig
    from hermes_core.doctor import DoctorCheck

__all__ = ["doctor_checks", "register_commands", "register_context_engines",
           "register_memory_providers"]


def _candidates() -> list[Any]:
    from hermes_core.paths import home_dir

    from .discovery import discover

    return [c for c in discover(home_dir()) if c.clash is None]


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    from .adapter_memory import memory_class

    for candidate in _candidates():
        if candidate.kind == "memory-provider":
            register(memory_class(candidate))


@hookimpl
def register_context_engines(register: Callable[[type], None]) -> None:
    from .adapter_engine import engine_class

    for candidate in _candidates():
        if candidate.kind == "context-engine":
            register(engine_class(candidate))


@hookimpl
def register_commands(register: Callable[[Any], None]) -> None:
    from .commands import hermes_group

    register(hermes_group)


@hookimpl
def doctor_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    from hermes_core.doctor import DoctorCheck

    from .discovery import discover
    from .status import READY, last_failure, status_of

    core = config.core
    selected = {*core.memory.providers, core.context.engine}
    checks: list[DoctorCheck] = []
    for candidate in discover(home):
        if candidate.clash is not None:
            checks.append(DoctorCheck(f"Hermes plugin {candidate.plugin}", ok=False,
                                      detail=candidate.clash, fix="remove or rename one of them"))
            continue
        if candidate.name not in selected:
            continue
        status = status_of(candidate, home)
        good = status.status == READY
        checks.append(DoctorCheck(
            f"Hermes plugin {candidate.name}", ok=good,
            detail=f"{status.status}: {status.detail}" if status.detail else status.status,
            fix=None if good else (status.fix or None)))
        failure = last_failure(home, candidate.plugin)
        if failure is not None:
            checks.append(DoctorCheck(
                f"Hermes plugin {candidate.name}: last session", ok=False, detail=failure,
                fix="fix what the error names; the next session tries again"))
    return checks
