"""Two commands editing config.yaml at once: neither change is lost.

``config set``, ``config unset``, ``plugins disable``/``enable`` and ``setup`` each read the file,
edit it and write it back. Each test runs the commands as real processes over a real home: the
first is held (a hook in its process) between reading the file and writing its edit, the second
runs meanwhile; once the second has finished (or waits on the lock), the first goes on. Both
changes must be in the file afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hermes_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]

#: the first command: ``edit_config_text`` (called after the file was read) returns its edit, then
#: the process waits for the test's "go" file before writing it
HELD = """
import sys, time
from pathlib import Path
from hermes_core import config_edit

ready, go = Path(sys.argv[1]), Path(sys.argv[2])
edit = config_edit.edit_config_text

def held(*args, **kwargs):
    out = edit(*args, **kwargs)
    if not ready.exists():
        ready.touch()
        give_up = time.monotonic() + 120
        while not go.exists() and time.monotonic() < give_up:
            time.sleep(0.01)
    return out

config_edit.edit_config_text = held
from hermes_core.cli import cli
cli.main(sys.argv[3:], prog_name="hermes-core")
"""

#: holds config.yaml's lock, says so, and waits to be killed
HOLDER = """
import sys, time
from pathlib import Path
from hermes_core.config_edit import config_lock

with config_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).touch()
    time.sleep(600)
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HERMES_CORE_DISABLE_PLUGINS", "HERMES_CORE_STRICT_PLUGINS")}
    env.update(HERMES_CORE_HOME=str(home), PYTHONPATH=str(ROOT))
    return env


def _start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, *args], env=_env(home), cwd=home,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(predicate, what: str, timeout: float = 120.0) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


def _waits_on_a_lock(pid: int) -> bool:
    """True when ``pid`` is blocked in ``flock`` (a '->' line of /proc/locks)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    return any("->" in line and str(pid) in line.split() for line in lines)


def _race(home: Path, tmp_path: Path, first: list[str], second: list[str]) -> tuple[str, str]:
    ready, go = tmp_path / "ready", tmp_path / "go"
    held = _start(home, "-c", HELD, str(ready), str(go), *first)
    try:
        _wait(lambda: ready.exists() or held.poll() is not None, "the first command's edit")
        assert held.poll() is None, held.communicate()[0]
        other = _start(home, "-m", "hermes_core", *second)
        try:
            # the second command finishes (it did not wait for the first), or waits on the lock
            _wait(lambda: other.poll() is not None or _waits_on_a_lock(other.pid),
                  "the second command")
            go.touch()
            out_first = held.communicate(timeout=120)[0]
            out_second = other.communicate(timeout=120)[0]
        finally:
            other.kill()
    finally:
        go.touch()
        held.kill()
        held.wait()
    assert held.returncode == 0, out_first
    assert other.returncode == 0, out_second
    return out_first, out_second


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_two_config_sets_at_once_keep_both_values(home: Path, tmp_path: Path):
    path = home / "config.yaml"
    path.write_text("# mine\nllm:\n  model: m0\n", encoding="utf-8")
    _race(home, tmp_path, ["config", "set", "llm.model", "m1"],
          ["config", "set", "llm.max_tokens", "1234"])
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["llm"] == {"model": "m1", "max_tokens": 1234}, data
    assert "# mine" in path.read_text(encoding="utf-8")


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_two_plugin_disables_at_once_keep_both(home: Path, tmp_path: Path):
    """Each computed the new plugins.disabled list from the file it had read: the second
    write dropped the first's name."""
    path = home / "config.yaml"
    path.write_text("llm:\n  model: m0\n", encoding="utf-8")
    _race(home, tmp_path, ["plugins", "disable", "todo"], ["plugins", "disable", "delegate"])
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert sorted(data["plugins"]["disabled"]) == ["delegate", "todo"], data


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_a_config_unset_during_a_plugin_disable_is_kept(home: Path, tmp_path: Path):
    path = home / "config.yaml"
    path.write_text("llm:\n  model: m0\n  max_tokens: 99\n", encoding="utf-8")
    _race(home, tmp_path, ["plugins", "disable", "todo"], ["config", "unset", "llm.max_tokens"])
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data == {"llm": {"model": "m0"}, "plugins": {"disabled": ["todo"]}}, data


def test_setup_refuses_to_overwrite_a_change_made_while_it_ran(home: Path, monkeypatch):
    """setup reads the file, asks, shows the diff, then wrote its version over whatever the file
    had become meanwhile: a config set made during the questions was lost without a word."""
    from hermes_core import firstrun
    from hermes_core.config_edit import set_config_value

    path = home / "config.yaml"
    path.write_text("llm:\n  model: m0\n", encoding="utf-8")
    render = firstrun.render_config

    def meanwhile(*args, **kwargs):
        out = render(*args, **kwargs)
        set_config_value(path, "llm.max_tokens", 777, validate=lambda _loaded: None)
        return out

    monkeypatch.setattr(firstrun, "render_config", meanwhile)
    result = CliRunner().invoke(cli, ["setup", "--yes", "--model", "m9"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "changed while setup was running" in result.output, result.output
    assert "nothing was written" in result.output.lower(), result.output
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == {
        "llm": {"model": "m0", "max_tokens": 777}}
    assert not list(home.glob("config.yaml.bak*"))
    monkeypatch.setattr(firstrun, "render_config", render)
    again = CliRunner().invoke(cli, ["setup", "--yes", "--model", "m9"], catch_exceptions=False)
    assert again.exit_code == 0, again.output
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["llm"]["model"] == "m9" and data["llm"]["max_tokens"] == 777


def test_a_lock_held_by_a_killed_process_does_not_block_edits(home: Path, tmp_path: Path):
    path = home / "config.yaml"
    path.write_text("llm:\n  model: m0\n", encoding="utf-8")
    holding = tmp_path / "holding"
    holder = _start(home, "-c", HOLDER, str(path), str(holding))
    try:
        _wait(lambda: holding.exists() or holder.poll() is not None, "the lock holder")
        assert holder.poll() is None, holder.communicate()[0]
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    finally:
        holder.kill()
    assert (home / "config.yaml.lock").exists()
    result = CliRunner().invoke(cli, ["config", "set", "llm.model", "m1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == {"llm": {"model": "m1"}}


def test_the_lock_sits_beside_the_file_a_symlinked_config_points_to(home: Path, tmp_path: Path):
    real = tmp_path / "dotfiles" / "hermes.yaml"
    real.parent.mkdir()
    real.write_text("llm:\n  model: m0\n", encoding="utf-8")
    link = home / "config.yaml"
    link.symlink_to(real)
    result = CliRunner().invoke(cli, ["config", "set", "llm.model", "m1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and "m1" in real.read_text(encoding="utf-8")
    assert (real.parent / "hermes.yaml.lock").exists()
    assert not (home / "config.yaml.lock").exists()
