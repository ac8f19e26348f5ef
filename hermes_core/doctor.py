"""What a plugin's ``doctor_checks`` hook answers: :class:`DoctorCheck`.

``hermes-core doctor`` prints the kernel's own checks (home, config, plugins, selections,
activation, API key) and then, labelled with their plugin, the checks every loaded plugin returns
from ``doctor_checks(home, config)``. A built-in store checks its files this way, and so does a
third-party plugin: the kernel knows none of them by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DoctorCheck"]


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    """One thing ``doctor`` checked, and what it found.

    ``ok`` is False when something is broken (``doctor`` then exits with 1); ``warning`` marks a
    problem that does not block (shown as ``warn``). ``detail`` says what was found, naming the
    file or server; ``fix`` (optional) says what to do about it, in one sentence.
    """

    name: str
    ok: bool
    detail: str
    warning: bool = False
    fix: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("DoctorCheck.name must be a non-empty str (what was checked)")
        if not isinstance(self.ok, bool) or not isinstance(self.warning, bool):
            raise ValueError(f"DoctorCheck {self.name!r}: ok and warning must be bool")
        if not isinstance(self.detail, str):
            raise ValueError(f"DoctorCheck {self.name!r}: detail must be a str")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``doctor --json`` prints (``fix`` only when there is one)."""
        out: dict[str, Any] = {"name": self.name, "ok": self.ok, "warning": self.warning,
                               "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        return out
