"""A Hermes plugin that hangs where it is only looked at (its import, its ``register(ctx)``,
its provider's ``is_available()``) never hangs ``hermes-core hermes plugins``, ``doctor`` or
``config validate``: each is bounded by ``hooks.timeouts.doctor_checks``, the plugin is named
as hung (in what, and the fix), and the other plugins are still listed and checked.

The commands run as subprocesses under an outer timeout, so a regression fails instead of
hanging the test run; the hung plugin's thread is a daemon and ends with its process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import hermes_style
import pytest
from conftest import drop_folder_plugin

DEADLINE = 3  # hooks.timeouts.doctor_checks in the test's config.yaml
BOUND = 60  # the most a command may take with a hung plugin (far below the hour it would hang)

HANGING = '''
import time
from agent.memory_provider import MemoryProvider

HANG_IN = "{hang_in}"
if HANG_IN == "import":
    time.sleep(3600)


class Sleepy(MemoryProvider):
    name = "sleepy"

    def is_available(self):
        if HANG_IN == "is_available()":
            time.sleep(3600)
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


def register(ctx):
    if HANG_IN == "register(ctx)":
        time.sleep(3600)
    ctx.register_memory_provider(Sleepy())
'''


def timed_cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hermes_core", *args], capture_output=True,
                          text=True, env=dict(os.environ), timeout=BOUND * 2)
    return done, time.monotonic() - started


def named_as_hung(text: str, hang_in: str) -> bool:
    return (f"hung: its {hang_in}" in text and "sleepy" in text
            and "hooks.timeouts.doctor_checks" in text and "hermes-sleepy" in text)


@pytest.mark.parametrize("hang_in", ["import", "register(ctx)", "is_available()"])
def test_a_hung_plugin_is_named_and_the_commands_go_on(core_home: Path, hang_in: str) -> None:
    drop_folder_plugin(core_home, "sleepy", HANGING.format(hang_in=hang_in))
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    (core_home / "config.yaml").write_text(
        "memory:\n  providers: [hermes-sleepy, hermes-recorder]\n"
        f"hooks:\n  timeouts:\n    doctor_checks: {DEADLINE}\n", encoding="utf-8")

    listed, took = timed_cli("hermes", "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    assert took < BOUND, took
    found = {p["name"]: p for p in json.loads(listed.stdout)["plugins"]}
    sleepy = found["hermes-sleepy"]
    assert sleepy["status"] == "failed"
    assert f"did not return within {DEADLINE} s" in sleepy["detail"]
    assert named_as_hung(sleepy["detail"] + sleepy["fix"], hang_in), sleepy
    assert found["hermes-recorder"]["status"] == "ready"

    doctor, took = timed_cli("doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    assert took < BOUND, took
    checks = json.loads(doctor.stdout)
    activation = next(c for c in checks if c["name"] == "activation")
    assert not activation["ok"] and named_as_hung(activation["detail"], hang_in), activation
    assert "hermes-recorder" not in activation["detail"]  # the other provider starts
    bridge = {c["name"]: c for c in checks if c.get("plugin") == "hermes_compat"}
    assert named_as_hung(json.dumps(bridge), hang_in), bridge
    assert [c["ok"] for name, c in bridge.items() if "hermes-recorder" in name] == [True]

    validated, took = timed_cli("config", "validate")
    assert validated.returncode == 1
    assert took < BOUND, took
    out = validated.stdout + validated.stderr
    assert named_as_hung(out, hang_in), out
    assert "hermes-recorder" not in out


SETTINGS_HANG = '''
import time
from agent.memory_provider import MemoryProvider

HANG_IN = "HANG_HERE"


class Sleepy(MemoryProvider):
    name = "sleepy"

    def is_available(self):
        return HANG_IN != "unavailable_reason()"

    def unavailable_reason(self):
        if HANG_IN == "unavailable_reason()":
            time.sleep(3600)
        return "needs its server"

    def get_config_schema(self):
        if HANG_IN == "get_config_schema()":
            time.sleep(3600)
        return [{"key": "mode", "description": "how it stores", "default": "fast"}]

    def save_config(self, values, hermes_home):
        if HANG_IN == "save_config()":
            time.sleep(3600)

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


def register(ctx):
    ctx.register_memory_provider(Sleepy())
'''


@pytest.mark.parametrize("hang_in", ["get_config_schema()", "save_config()",
                                     "unavailable_reason()"])
def test_a_plugin_hung_in_its_settings_or_reason_is_named(core_home: Path, hang_in: str) -> None:
    """Building the provider asks its ``get_config_schema()`` and (its section has values) its
    ``save_config()``, and an unavailable one its ``unavailable_reason()``; ``hermes plugins``
    asks the schema and the reason too. Each is bounded as its ``is_available()`` is: a plugin
    hanging there is named (in what) and the commands go on. They hung for good."""
    drop_folder_plugin(core_home, "sleepy", SETTINGS_HANG.replace("HANG_HERE", hang_in))
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    (core_home / "config.yaml").write_text(
        "memory:\n  providers: [hermes-sleepy, hermes-recorder]\n"
        "hermes-sleepy:\n  mode: careful\n"
        f"hooks:\n  timeouts:\n    doctor_checks: {DEADLINE}\n", encoding="utf-8")

    listed, took = timed_cli("hermes", "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    assert took < BOUND, took
    found = {p["name"]: p for p in json.loads(listed.stdout)["plugins"]}
    sleepy = found["hermes-sleepy"]
    if hang_in == "save_config()":  # not called by a listing
        assert sleepy["status"] == "ready", sleepy
    else:
        assert sleepy["status"] == "failed", sleepy
        assert named_as_hung(sleepy["detail"] + sleepy["fix"], hang_in), sleepy
    assert found["hermes-recorder"]["status"] == "ready"

    doctor, took = timed_cli("doctor", "--json")
    assert doctor.returncode == 1, doctor.stderr
    assert took < BOUND, took
    checks = json.loads(doctor.stdout)
    activation = next(c for c in checks if c["name"] == "activation")
    assert not activation["ok"] and named_as_hung(activation["detail"], hang_in), activation
    assert "hermes-recorder" not in activation["detail"]

    validated, took = timed_cli("config", "validate")
    assert validated.returncode == 1
    assert took < BOUND, took
    out = validated.stdout + validated.stderr
    assert named_as_hung(out, hang_in), out
    assert "hermes-recorder" not in out
