"""Building the plugin stack for one case's scratch home, from a config file.

The scratch home gets a copy of the real home's ``config.yaml`` (and ``SOUL.md``; its
``plugins/`` folder is linked), then the eval's overrides:

* ``providers`` replaces ``memory.providers`` and ``engine`` ``context.engine``;
* ``settings`` are ``KEY=VALUE`` config edits, where ``{case}`` in a value becomes the case's id
  (made safe for ids: letters, digits, ``-`` and ``_``) — how a server-backed provider keeps
  cases apart, e.g. ``honcho.workspace=eval-{case}`` or ``hindsight.bank=eval-{case}``;
* no API key (a plugin that would call the model itself takes its offline path), no background
  memory review and no pre-compaction flush (``memory.nudge_interval: 0``,
  ``memory.flush_before_compaction: false``): the haystack is stored as it was said; no model
  curates it during an offline run.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from hermes_core.config import load_config, load_copied_config
from hermes_core.config_edit import edit_config_text, parse_cli_value
from hermes_core.errors import ConfigError
from hermes_core.replay import RecordingHost, build_host

__all__ = ["StackSpec", "case_slug"]


def case_slug(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", case_id).strip("-")[:80] or "case"


class StackSpec:
    """A host factory: ``spec(home, case_id)`` builds the stack in ``home``."""

    def __init__(self, real_home: Path | None, *, providers: Sequence[str] | None = None,
                 engine: str | None = None, settings: Iterable[str] = (), builtins: bool = True,
                 entry_points: bool = True, directories: bool = True,
                 plugins: Iterable[tuple[str, object]] = ()) -> None:
        self.real_home = real_home
        self.providers = list(providers) if providers else None
        self.engine = engine
        self.settings: list[tuple[str, str]] = []
        for item in settings:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. hindsight.bank=eval-{{case}}")
            self.settings.append((key.strip(), value))
        self.builtins, self.entry_points, self.directories = builtins, entry_points, directories
        self.plugins = list(plugins)

    def prepare(self, home: Path, case_id: str) -> None:
        real = self.real_home
        text = ""
        if real is not None:
            for name in ("config.yaml", "SOUL.md"):
                if (real / name).is_file():
                    shutil.copy2(real / name, home / name)
            if (real / "plugins").is_dir() and not (home / "plugins").exists():
                (home / "plugins").symlink_to(real / "plugins", target_is_directory=True)
            if (home / "config.yaml").is_file():
                text = (home / "config.yaml").read_text(encoding="utf-8")
        path = home / "config.yaml"
        edits: list[tuple[str, object]] = [("memory.nudge_interval", 0),
                                           ("memory.flush_before_compaction", False)]
        if self.providers is not None:
            edits.append(("memory.providers", list(self.providers)))
        if self.engine is not None:
            edits.append(("context.engine", self.engine))
        slug = case_slug(case_id)
        edits += [(k, parse_cli_value(v.replace("{case}", slug))) for k, v in self.settings]
        for key, value in edits:
            text = edit_config_text(text, path, key, value)
        path.write_text(text, encoding="utf-8")

    def __call__(self, home: Path, case_id: str) -> RecordingHost:
        self.prepare(home, case_id)
        config = load_config(home) if self.real_home is None else load_copied_config(
            home, self.real_home)
        host = build_host(config, home, builtins=self.builtins, entry_points=self.entry_points,
                          directories=self.directories, plugins=self.plugins)
        host.validate_config()
        return host
