"""`hermes-core plugins new` (the built-in plugin ``scaffold``, a sub-command it adds to the
kernel's ``plugins`` group): each kind's generated package passes its own tests at once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.scaffold.build import ScaffoldError, scaffold


@pytest.mark.parametrize("kind", ["memory", "context-engine", "tool", "platform"])
def test_generated_package_tests_pass(kind, tmp_path, home):
    result = CliRunner().invoke(cli, ["plugins", "new", f"demo-{kind}", "--kind", kind,
                                      "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / f"demo-{kind}"
    assert (root / "pyproject.toml").read_text().count('[project.entry-points."hermes_core.plugins"]') == 1
    # the generated tests import the package from src/ (the install path is covered by
    # tests/integration/test_scaffold_install.py)
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         cwd=root, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout and "failed" not in run.stdout


@pytest.mark.parametrize(("name", "fragment"), [("Bad Name", "invalid"), ("class", "keyword")])
def test_bad_names(name, fragment, tmp_path):
    with pytest.raises(ScaffoldError, match=fragment):
        scaffold(name, "memory", tmp_path)


def test_refuses_to_overwrite(tmp_path, home):
    scaffold("twice", "tool", tmp_path)
    result = CliRunner().invoke(cli, ["plugins", "new", "twice", "--kind", "tool",
                                      "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "already exists" in result.output


def test_new_is_the_scaffold_plugins_sub_command_of_the_plugins_group(home):
    import click

    from hermes_core.cli.plugins_cmd import plugins
    from hermes_core.host import COMMAND_GROUPS, PluginHost
    from hermes_core.plugins.scaffold.commands import new

    assert "new" not in plugins.commands and "plugins" in COMMAND_GROUPS
    host = PluginHost.load(entry_points=False, directories=False)
    assert host.subcommands["plugins"]["new"] == (new, "scaffold")
    assert "new" not in host.commands
    assert "command:plugins new" in host.records["scaffold"].registers
    # the group lists it, described from the command index
    listed = CliRunner().invoke(cli, ["plugins", "--help"])
    assert listed.exit_code == 0
    assert "  new        Create a plugin package NAME" in listed.output
    ctx = click.Context(plugins)
    assert plugins.list_commands(ctx) == ["disable", "enable", "install", "list", "new",
                                          "uninstall"]


def test_new_says_how_to_enable_its_plugin_when_disabled(home, tmp_path):
    assert CliRunner().invoke(cli, ["plugins", "--help"]).exit_code == 0  # the index knows it
    (home / "config.yaml").write_text("plugins:\n  disabled: [scaffold]\n")
    gone = CliRunner().invoke(cli, ["plugins", "new", "x", "--kind", "tool", "--dir",
                                    str(tmp_path)])
    assert gone.exit_code == 1
    assert ("the command 'plugins new' is provided by the plugin 'scaffold', which is disabled; "
            "enable it with 'hermes-core plugins enable scaffold'") in gone.output
    assert not (tmp_path / "x").exists()
    listed = CliRunner().invoke(cli, ["plugins", "--help"])
    assert listed.exit_code == 0 and "new " not in listed.output


def test_a_plugin_cannot_take_a_sub_command_of_the_plugins_group(home):
    import click

    from hermes_core import hookimpl
    from hermes_core.cli.plugins_cmd import plugins
    from hermes_core.host import RESERVED_SUBCOMMANDS, PluginHost

    assert RESERVED_SUBCOMMANDS["plugins"] == set(plugins.commands)

    class Taker:
        @hookimpl
        def register_commands(self, register):
            register(click.Command("list"), group="plugins")

    host = PluginHost.load(entry_points=False, directories=False)
    record = host.register_plugin("taker", Taker())
    assert "'plugins list', which is the kernel's own" in str(record.error)
    assert host.subcommands["plugins"].get("list") is None


def test_the_scaffolds_old_home_warns_and_still_resolves():
    import hermes_core.scaffold as old

    with pytest.warns(DeprecationWarning, match="moved to hermes_core.plugins.scaffold.build"):
        assert old.scaffold is scaffold
    with pytest.warns(DeprecationWarning):
        assert old.ScaffoldError is ScaffoldError


def test_the_plugins_groups_help_imports_no_plugin_and_new_imports_only_its_own(home):
    """``plugins --help`` describes ``new`` from the command index; ``plugins new --help`` asks
    the scaffold plugin alone (no other plugin, no host)."""
    from test_cli import _imports_after

    _imports_after(["plugins", "--help"], home)  # the first one builds the command index
    listed = _imports_after(["plugins", "--help"], home)
    assert not any(m.startswith("hermes_core.plugins.") for m in listed)
    helped = _imports_after(["plugins", "new", "--help"], home)
    plugins = {m for m in helped if m.startswith("hermes_core.plugins.")}
    assert plugins == {"hermes_core.plugins.scaffold", "hermes_core.plugins.scaffold.commands"}
