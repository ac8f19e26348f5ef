"""What changed between two states of MEMORY.md / USER.md, read from the version history.

``hermes-core memory diff VERSION`` shows what one version changed (each store it touched, from
its text right before to right after); ``memory diff VERSION OTHER`` how the stores differ between
right after VERSION and right after OTHER. Both read only the history (:class:`.history.History`,
or its PostgreSQL form), so they work the same for the shared memory and each user's, on both
backends.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .history import History, UnknownVersion
from .store import FILENAMES, TARGETS

__all__ = ["StoreDiff", "version_diff"]


@dataclass(frozen=True)
class StoreDiff:
    """One store's text at two points of the history (``None``: no file) and their diff."""

    target: str
    old: str | None
    new: str | None
    old_label: str
    new_label: str

    @property
    def lines(self) -> list[str]:
        """The unified diff, line by line (no line endings); empty when the texts are equal."""
        name = FILENAMES[self.target]
        return list(difflib.unified_diff(
            (self.old or "").splitlines(), (self.new or "").splitlines(),
            fromfile=f"{name} ({self.old_label})", tofile=f"{name} ({self.new_label})",
            lineterm=""))

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "from": self.old_label, "to": self.new_label,
                "old": self.old, "new": self.new, "diff": self.lines}


def _before(versions: list[Any], number: int, target: str) -> str | None:
    """The text of ``target`` right before version ``number`` (which touched it)."""
    this = next(v for v in versions if v.version == number)
    if "before" in this.stores[target]:
        text: str | None = this.stores[target]["before"]
        return text
    earlier = [v for v in versions if v.version < number and target in v.stores]
    return earlier[-1].stores[target].get("after") if earlier else None


def version_diff(history: History | None, version: int, other: int | None = None,
                 targets: tuple[str, ...] = TARGETS) -> list[StoreDiff]:
    """What ``version`` changed in each of ``targets`` it touched, or (with ``other``) how each
    store differs between right after ``version`` and right after ``other``; stores that did
    not change are left out. An unknown version is refused (:class:`.errors.InvalidRequest`)
    with the range the history holds."""
    if history is None:
        raise InvalidRequest("the memory history is turned off (file_memory.history_limit: 0); "
                             "there are no versions to compare")
    try:
        if other is None:
            versions = history.read()
            touched = history.get(version).stores
            pairs = {t: (_before(versions, version, t), touched[t].get("after"))
                     for t in targets if t in touched}
            labels = (f"before version {version}", f"after version {version}")
        else:
            old, new = history.state_at(version, targets), history.state_at(other, targets)
            pairs = {t: (old[t], new[t]) for t in targets if t in old and t in new}
            labels = (f"after version {version}", f"after version {other}")
    except UnknownVersion as exc:
        raise InvalidRequest(str(exc)) from None
    return [StoreDiff(t, a, b, *labels) for t, (a, b) in pairs.items() if a != b]
