"""Nothing of a Hermes plugin is imported, and no stand-in module installed, until one is
selected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hermes_style
from conftest import drop_folder_plugin

PROBE = """
import json, sys
from hermes_core.host import PluginHost
host = PluginHost.load()
host.activate_memory_providers()
from hermes_core_hermes_compat import shims
print(json.dumps({
    "providers": host.registries.memory_providers.names(),
    "active": list(host.providers()),
    "hermes_modules": sorted(m for m in sys.modules if m.split(".")[0] in (
        "agent", "tools", "hermes_constants", "hermes_cli", "verbatim", "hermes_llmwiki",
        "lossless_hermes", "hermes_itsuki", "hermes_semantic_memory", "hermes_local_memory",
        "hermes_core_hermes_folder_plugins")),
    "shims": shims.installed(),
}))
"""


def probe() -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_unselected_plugins_are_not_imported(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    (core_home / "config.yaml").write_text("memory:\n  providers: [file_memory]\n", encoding="utf-8")
    found = probe()
    assert "hermes-recorder" in found["providers"]  # type: ignore[operator]
    assert found["hermes_modules"] == [] and found["shims"] is False


def test_selected_plugin_is_imported_with_the_stand_ins(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    (core_home / "config.yaml").write_text("memory:\n  providers: [hermes-recorder]\n",
                                           encoding="utf-8")
    found = probe()
    assert found["active"] == ["memory-provider:hermes-recorder"]
    assert found["shims"] is True
    modules = found["hermes_modules"]
    assert "agent.memory_provider" in modules and "tools.registry" in modules  # type: ignore[operator]
    # only the stand-ins the plugin imported, nothing else of theirs
    assert "hermes_cli.config" not in modules  # type: ignore[operator]


def test_stand_ins_serve_only_their_names() -> None:
    code = ("from hermes_core_hermes_compat import shims; shims.install()\n"
            "import agent.memory_provider, tools.registry\n"
            "try:\n    import agent.context_compressor\nexcept ModuleNotFoundError as e:\n"
            "    print('missing', e.name)\n"
            "import sys; print(tools.registry.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "missing agent.context_compressor" in out.stdout
    assert "hermes_core_hermes_compat" in out.stdout  # served from the bridge, not site-packages
