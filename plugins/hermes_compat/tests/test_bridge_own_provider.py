"""The bridge never offers hermes-core's own Hermes-side provider back to hermes-core: selecting
it would load the stack inside itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from hermes_core_hermes_compat import discovery
from hermes_core_hermes_compat.hermes_side.install import install_folder_plugin


def test_the_folder_plugin_written_for_hermes_is_not_discovered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermes_home = tmp_path / "hermes"
    hermes_home.mkdir()
    assert install_folder_plugin(hermes_home).is_dir()
    other = hermes_home / "plugins" / "memory" / "notes"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("def register(ctx):\n    pass\n", encoding="utf-8")
    monkeypatch.setenv(discovery.HERMES_HOME_ENV, str(hermes_home))
    names = [c.plugin for c in discovery.discover(tmp_path / "core")]
    assert names.count("notes") == 1
    assert not [n for n in names if n != "notes" and "hermes_core" in n], names


def test_its_own_entry_point_is_skipped() -> None:
    own = [ep for _, ep in discovery._entry_points() if ep.module.startswith(discovery._OWN_PACKAGE)]
    candidates = [c.module for c in discovery._entry_point_candidates()]
    assert not [m for m in candidates if m and m.startswith(discovery._OWN_PACKAGE)]
    # where the distribution is installed (tox), its entry point exists and was skipped
    assert all(ep.module not in candidates for ep in own)
