"""The hermes-core command: listings, JSON shapes, edits, exit codes, and what stays lazy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hermes_core.cli import cli

ENGINE = """
from hermes_core import ContextEngine, hookimpl

class Engine(ContextEngine):
    name = "{name}"

@hookimpl
def register_context_engines(register):
    register(Engine)
"""


def test_plugins_list_json_fields(run, fake_dist, dir_plugin):
    fake_dist("hermes-core-x", "2.0", {"xplug": "xplug_mod"}, {"xplug_mod": ENGINE.format(name="x")})
    fake_dist("broken-dist", "0.1", {"broken": "broken_mod"}, {"broken_mod": "raise ImportError('nope')"})
    dir_plugin("local", ENGINE.format(name="local_engine"))
    result = run("plugins", "list", "--json")
    assert result.exit_code == 0, result.output
    data = {p["name"]: p for p in json.loads(result.output)}
    for record in data.values():
        assert {"name", "source", "distribution", "version", "kinds", "enabled", "error"} <= set(record)
    assert data["xplug"]["distribution"] == "hermes-core-x" and data["xplug"]["version"] == "2.0"
    assert data["xplug"]["kinds"] == ["context-engine"] and data["xplug"]["error"] is None
    assert data["broken"]["error"] and "ImportError" in data["broken"]["error"]
    assert data["local"]["source"] == "directory"


def test_plugins_list_human(run, dir_plugin):
    dir_plugin("local", ENGINE.format(name="local_engine"))
    result = run("plugins", "list")
    assert result.exit_code == 0
    assert "local" in result.output and "context-engine:local_engine" in result.output


def test_disable_then_enable(run, home, dir_plugin, tmp_path):
    marker = tmp_path / "m"
    dir_plugin("side", f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')\n")
    result = run("plugins", "disable", "side")
    assert result.exit_code == 0, result.output
    assert not marker.exists()  # disabling imports nothing
    listed = {p["name"]: p for p in json.loads(run("plugins", "list", "--json").output)}
    assert listed["side"]["enabled"] is False and not marker.exists()
    assert run("plugins", "enable", "side").exit_code == 0
    listed = {p["name"]: p for p in json.loads(run("plugins", "list", "--json").output)}
    assert listed["side"]["enabled"] is True and marker.exists()


def test_disable_unknown_name_lists_known(run, dir_plugin):
    dir_plugin("local", ENGINE.format(name="e"))
    result = run("plugins", "disable", "nosuch")
    assert result.exit_code == 1
    assert "no plugin named 'nosuch'" in result.output and "local" in result.output


def test_config_set_unknown_engine_refused_and_lists_available(run, home, dir_plugin):
    dir_plugin("one", ENGINE.format(name="alpha"))
    (home / "config.yaml").write_text("context:\n  engine: alpha\n")
    result = run("config", "set", "context.engine", "no-such-engine")
    assert result.exit_code == 1
    assert "unknown context engine 'no-such-engine'" in result.output
    assert "Available: alpha" in result.output and "may not be installed" in result.output
    assert (home / "config.yaml").read_text() == "context:\n  engine: alpha\n"
    assert run("config", "set", "context.engine", "alpha").exit_code == 0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("bogus_section: 1\n", "unknown top-level key 'bogus_section'"),
        ("llm:\n  max_tokens: lots\n", "llm.max_tokens"),
        ("llm:\n  model: [unclosed\n", "malformed YAML"),
    ],
)
def test_config_validate_fails_naming_key_or_line(run, home, dir_plugin, text, fragment):
    dir_plugin("one", ENGINE.format(name="alpha"))
    (home / "config.yaml").write_text(text)
    result = run("config", "validate")
    assert result.exit_code == 1
    assert fragment in result.output and "line" in result.output


# A config that selects only the throwaway engine, so these tests do not depend on which
# built-in plugins exist.
ONLY_ALPHA = "memory:\n  providers: []\ncontext:\n  engine: alpha\n"


def test_config_validate_ok_and_json(run, home, dir_plugin):
    dir_plugin("one", ENGINE.format(name="alpha"))
    (home / "config.yaml").write_text(ONLY_ALPHA)
    assert run("config", "validate").exit_code == 0
    data = json.loads(run("config", "validate", "--json").output)
    assert data["valid"] is True and data["errors"] == []


def test_config_show_redacts_and_get(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-very-secret")
    shown = run("config", "show", "--json")
    assert "sk-very-secret" not in shown.output
    assert json.loads(shown.output)["llm"]["api_key"] == "**********"
    assert run("config", "get", "llm.api_key").output.strip() == "**********"
    assert run("config", "get", "memory.prefetch_timeout").output.strip() == "0.3"
    missing = run("config", "get", "llm.nope")
    assert missing.exit_code == 1 and "no key 'llm.nope'" in missing.output


def test_config_path(run, home):
    assert run("config", "path").output.strip() == str(home / "config.yaml")


def test_config_unset(run, home):
    (home / "config.yaml").write_text("llm:\n  max_tokens: 5\n")
    assert run("config", "unset", "llm.max_tokens").exit_code == 0
    assert run("config", "get", "llm.max_tokens").output.strip() == "4096"


def test_commands_work_with_a_broken_plugin(run, fake_dist):
    fake_dist("broken-dist", "0.1", {"broken": "broken_mod2"}, {"broken_mod2": "1/0"})
    for args in (["plugins", "list"], ["plugins", "list", "--json"], ["config", "show"],
                 ["plugins", "disable", "broken"]):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)


def test_doctor_reports(run, home, dir_plugin):
    dir_plugin("one", ENGINE.format(name="alpha"))
    (home / "config.yaml").write_text(ONLY_ALPHA)
    (home / "plugins" / "nofile").mkdir()
    result = run("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["plugins"]["warning"] and "nofile" in checks["plugins"]["detail"]
    assert checks["model"]["warning"] is True and "no API key" in checks["model"]["detail"]
    assert result.exit_code == 0
    (home / "state.db").write_bytes(b"this is not sqlite" * 100)
    result = run("doctor")
    assert result.exit_code == 1 and "cannot be read as SQLite" in result.output
    assert (home / "state.db").read_bytes() == b"this is not sqlite" * 100


def test_uninstall_builtin_is_refused(run, monkeypatch):
    from hermes_core import loader

    monkeypatch.setitem(loader.BUILTIN_PLUGINS, "core_thing", "json")
    result = run("plugins", "uninstall", "core_thing")
    assert result.exit_code == 1 and "plugins disable core_thing" in result.output


def _imports_after(args: list[str], home) -> set[str]:
    """Run the CLI in a fresh interpreter and return the modules it imported."""
    code = (
        "import sys\nfrom hermes_core.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('MODULES=' + ','.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env=env, check=True).stdout
    return set(out.rsplit("MODULES=", 1)[1].strip().split(","))


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["plugins", "disable", "lazyplug"]])
def test_help_version_disable_import_no_plugin(args, home, tmp_path):
    folder = home / "plugins" / "lazyplug"
    folder.mkdir(parents=True)
    marker = tmp_path / "imported"
    (folder / "__init__.py").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    if args == ["--help"]:
        # The first --help builds the index of plugin commands from the built-in plugins (they
        # ship with the kernel); third-party plugins are never imported for it.
        _imports_after(args, home)
        assert not marker.exists()
    modules = _imports_after(args, home)
    assert not marker.exists()
    assert not any(m.startswith("hermes_core_directory_plugins") for m in modules)
    if args != ["plugins", "disable", "lazyplug"]:
        assert "pydantic" not in modules and "hermes_core.host" not in modules


def test_help_names_a_plugin_installed_since_the_list_was_made(home, run):
    """--help imports no third-party plugin, so one added since a command last loaded the
    plugins is named, not listed; once a command has loaded them, its commands are listed."""
    folder = home / "plugins" / "hello_cmd"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(
        "import click\nfrom hermes_core import hookimpl\n\n"
        "@click.command('hello')\ndef hello():\n    \"\"\"Say hello.\"\"\"\n\n"
        "@hookimpl\ndef register_commands(register):\n    register(hello)\n")
    first = run("--help")
    assert first.exit_code == 0 and "Say hello." not in first.output
    assert "Not listed yet: the commands (if any) of hello_cmd" in " ".join(first.output.split())
    assert run("plugins", "list").exit_code == 0
    after = run("--help")
    assert "Say hello." in after.output and "Not listed yet" not in after.output
    (home / "config.yaml").write_text("plugins:\n  disabled: [hello_cmd]\n")
    assert "Not listed yet" not in run("--help").output  # a disabled plugin is not named


def test_a_builtin_plugin_command_loads_only_its_plugin_while_the_index_is_current(home, tmp_path):
    folder = home / "plugins" / "lazyplug"
    folder.mkdir(parents=True)
    marker = tmp_path / "imported"
    (folder / "__init__.py").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    _imports_after(["--help"], home)  # the index, current, names session_archive for 'sessions'
    modules = _imports_after(["sessions", "--help"], home)
    assert not marker.exists()
    assert "hermes_core.plugins.memory.session_archive" in modules
    others = {m for m in modules if m.startswith("hermes_core.plugins.")
              and not m.startswith("hermes_core.plugins.memory.session_archive")}
    assert others <= {"hermes_core.plugins", "hermes_core.plugins.memory"}, sorted(others)
    assert "hermes_core.host" not in modules and "pydantic" not in modules  # no host, no config
    # A stale index (the directory plugin changed since): every plugin is loaded, as before.
    (folder / "__init__.py").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"
                                        "# changed\n")
    os.utime(folder / "__init__.py", ns=(1, 1))
    modules = _imports_after(["sessions", "--help"], home)
    assert marker.exists()
    assert "hermes_core.plugins.eval" in modules
    marker.unlink()
    # Current again (the full load rewrote it), but the config's allow-list leaves the plugin out:
    # the full load says why the command is missing.
    (home / "config.yaml").write_text("plugins:\n  enabled_only: [file_memory]\n")
    _imports_after(["--help"], home)
    code = ("import sys\nfrom hermes_core.cli import main\nmain(sys.argv[1:])\n")
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", code, "sessions", "--help"], capture_output=True,
                          text=True, env=env)
    assert done.returncode != 0 and "session_archive" in done.stderr, done.stderr


def test_debug_shows_traceback(home):
    (home / "config.yaml").write_text("llm: [\n")
    plain = subprocess.run([sys.executable, "-m", "hermes_core", "config", "show"],
                           capture_output=True, text=True, env={**os.environ})
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert "malformed YAML" in plain.stderr
    debug = subprocess.run([sys.executable, "-m", "hermes_core", "--debug", "config", "show"],
                           capture_output=True, text=True, env={**os.environ})
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_help_lists_the_kernel_commands_without_importing_them(home):
    import click

    from hermes_core.cli import COMMANDS, SHORT_HELP

    assert set(SHORT_HELP) == set(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:  # the table says what each command's own help says
        command = cli.get_command(ctx, name)
        assert command is not None
        table = click.Command(name, help=SHORT_HELP[name]).get_short_help_str(200)
        assert table == command.get_short_help_str(200), name
    _imports_after(["--help"], home)  # the first --help builds the plugin command index
    modules = _imports_after(["--help"], home)
    assert not any(m.startswith("hermes_core.cli.") and m.endswith("_cmd") for m in modules)
