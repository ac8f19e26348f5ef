"""A Hermes Agent home: what it holds, checked before anything is imported.

A Hermes home (``~/.hermes``, or ``$HERMES_HOME``) is recognised by its own files: ``state.db``
(sessions), ``memories/MEMORY.md`` / ``memories/USER.md``, ``skills/`` and ``config.yaml``. A folder
with none of them is refused with the path and the fix; so is this hermes-core home itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_core.errors import HermesCoreError

__all__ = ["HermesHome", "HermesImportError", "default_home", "link_out", "open_home"]


class HermesImportError(HermesCoreError):
    """A Hermes home, or a file in it, cannot be imported; the message names it and the fix.
    Raised before anything is written."""


def default_home() -> Path:
    """``$HERMES_HOME`` when set, else ``~/.hermes`` (where Hermes Agent keeps its data)."""
    env = os.environ.get("HERMES_HOME")
    return Path(env).expanduser() if env else Path.home() / ".hermes"


@dataclass(frozen=True)
class HermesHome:
    root: Path
    #: Hermes' config.yaml, parsed ({} when absent)
    config: dict[str, Any]

    @property
    def state_db(self) -> Path:
        return self.root / "state.db"

    @property
    def memories(self) -> Path:
        return self.root / "memories"

    @property
    def skills(self) -> Path:
        return self.root / "skills"

    def memory_provider(self) -> str | None:
        """The external memory provider Hermes was configured with (``memory.provider``)."""
        memory = self.config.get("memory")
        name = memory.get("provider") if isinstance(memory, dict) else None
        return name.strip() if isinstance(name, str) and name.strip() else None


def link_out(path: Path, root: Path) -> str | None:
    """Why ``path`` is not read when it is a link to a file outside the Hermes home ``root`` (a
    home copied from elsewhere may link to this user's own files, which the import would put in
    the memory every prompt carries), else None."""
    target = path.resolve()
    if target.is_relative_to(root.resolve()):
        return None
    return (f"{path} is a link to {target}, outside the Hermes home, so it was not imported; if it "
            f"is meant for hermes-core, copy the file itself into {path.parent} and run the "
            "import again")


def open_home(path: Path, *, core_home: Path) -> HermesHome:
    """The Hermes home at ``path``, or :class:`HermesImportError` saying why it is not one."""
    root = path.expanduser()
    if not root.exists():
        raise HermesImportError(
            f"{root} does not exist: give the Hermes Agent home to import (the folder holding "
            "state.db and memories/, ~/.hermes by default or $HERMES_HOME); nothing was imported")
    if not root.is_dir():
        raise HermesImportError(
            f"{root} is a file, not a Hermes home folder: give the folder that holds it "
            f"('hermes-core import hermes {root.parent}'); nothing was imported")
    if root.resolve() == core_home.expanduser().resolve():
        raise HermesImportError(
            f"{root} is this hermes-core home, not a Hermes Agent home: give the Hermes home "
            "(~/.hermes by default); nothing was imported")
    marks = [root / "state.db", root / "memories" / "MEMORY.md", root / "memories" / "USER.md",
             root / "skills", root / "config.yaml"]
    if not any(m.exists() for m in marks):
        raise HermesImportError(
            f"{root} is not a Hermes Agent home: it holds none of state.db, memories/MEMORY.md, "
            "memories/USER.md, skills/ or config.yaml. Give the folder Hermes keeps its data in "
            "(~/.hermes by default, or the $HERMES_HOME it ran with); nothing was imported")
    return HermesHome(root, _read_config(root / "config.yaml"))


def _read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        # where and what, never the parser's quote of the line: Hermes keeps API keys here
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise HermesImportError(
            f"{path}{where} cannot be read as YAML ({problem}); fix it or move it aside (only "
            "its memory.provider and memory limits are used); nothing was imported") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HermesImportError(
            f"{path} is not a YAML mapping (it holds a {type(data).__name__}); fix it or move it "
            "aside; nothing was imported")
    return data
