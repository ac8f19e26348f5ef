"""Copying stores between backends (``hermes-core storage migrate``): the hook's kernel values.

``storage migrate --to URL`` (this home's files into a database) and ``--from URL`` (the way
back) call the ``copy_storage(source, target, progress)`` hook once; every loaded plugin that
keeps a store copies its own and answers a :class:`CopyReport`. The built-in stores (session
archive, curated memory, skills, the lossless engine's archive) take part exactly like a
third-party plugin's store. The rules every implementation keeps:

* **the source is only read**: nothing in it is changed, moved or deleted;
* **never overwrite**: what the target already holds is skipped (and counted in ``skipped``), so
  an interrupted migration can simply be run again;
* **fail loudly**: raise an error saying what could not be copied and how to fix it; the kernel
  names the plugin, the other plugins still copy theirs, and the command exits with 1.

:func:`merge_reports` turns the hook's outcomes into the command's report (``--json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._hookcall import HookOutcome
    from ..config import LoadedConfig
    from .url import StorageURL

__all__ = ["CopyProgress", "CopyReport", "StorageSide", "merge_reports"]


@dataclass(frozen=True, slots=True)
class StorageSide:
    """One side of a copy: this home's files (``url`` is None) or the database at ``url``.

    ``home`` and ``config`` are the home being migrated and its loaded config (read your section
    with :func:`hermes_core.config.validate_section`); both sides carry the same ones, since
    ``--from`` copies the database into this home.
    """

    home: Path
    config: LoadedConfig
    url: StorageURL | None = None

    @property
    def is_database(self) -> bool:
        return self.url is not None


class CopyProgress(Protocol):
    """``progress(task, done, total)``: how far one task of the calling plugin is.

    Call it with ``done=0`` before a long task, then after each batch; each task (``"sessions"``)
    gets its own progress bar, labelled with the plugin, when the command runs in a terminal.
    """

    def __call__(self, task: str, done: int, total: int) -> None: ...


@dataclass(frozen=True)
class CopyReport:
    """What one plugin's ``copy_storage`` did.

    ``copied`` and ``skipped`` count by kind (``{"sessions": 3, "messages": 5}``); ``skipped`` is
    what the target already held (or what was left alone because it differs: say so in
    ``lines``). ``lines`` are the human-readable summary ``storage migrate`` prints under the
    plugin's name (say what was left alone and what the user may want to do next); ``detail`` is
    any JSON-serialisable extra shown by ``--json`` (the names copied, for one).
    """

    copied: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)
    lines: Sequence[str] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for label, counts in (("copied", self.copied), ("skipped", self.skipped)):
            if not isinstance(counts, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    and v >= 0 for k, v in counts.items()):
                raise ValueError(f"CopyReport.{label} must map a kind (str) to a count (int >= 0)")
        if isinstance(self.lines, str) or not all(isinstance(line, str) for line in self.lines):
            raise ValueError("CopyReport.lines must be a sequence of str (one line each)")

    def to_dict(self) -> dict[str, Any]:
        return {"copied": dict(self.copied), "skipped": dict(self.skipped),
                "lines": list(self.lines), "detail": dict(self.detail)}


def merge_reports(outcomes: list[HookOutcome]) -> dict[str, Any]:
    """One report from every plugin's answer: each plugin's own, the totals per kind, and one
    error per plugin that failed (naming it, what failed, and that the source is intact)."""
    plugins: dict[str, Any] = {}
    copied: dict[str, int] = {}
    skipped: dict[str, int] = {}
    errors: list[dict[str, str]] = []
    for outcome in outcomes:
        if outcome.ok:
            if outcome.value is None:
                continue  # the plugin keeps no store
            part = outcome.value.to_dict()
            plugins[outcome.plugin] = part
            for totals, counts in ((copied, part["copied"]), (skipped, part["skipped"])):
                for kind, n in counts.items():
                    totals[kind] = totals.get(kind, 0) + n
            continue
        error = outcome.error
        what = (f"{type(error).__name__}: {error}" if error is not None else outcome.status)
        errors.append({"plugin": outcome.plugin, "error": what, "message": (
            f"plugin {outcome.plugin!r} could not copy its store: {what}. Its source data was "
            "only read and is intact; what the other plugins copied stays. Fix the cause, then "
            "run the same command again: what is already there is skipped")})
    return {"copied": copied, "skipped": skipped, "plugins": plugins, "errors": errors}
