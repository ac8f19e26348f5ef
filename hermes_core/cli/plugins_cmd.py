"""``hermes-core plugins``: list, install, uninstall, enable, disable; and the sub-commands plugins
add to the group (``plugins new`` comes from the built-in plugin ``scaffold``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from ._common import echo_json, load_host, warn
from ._plugin_commands import WithPluginSubcommands

__all__ = ["plugins"]


@click.group(cls=WithPluginSubcommands)
def plugins() -> None:
    """List, install and switch plugins."""


@plugins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per plugin.")
def list_plugins(as_json: bool) -> None:
    """List every plugin: built-in, installed (entry points) and directory plugins."""
    host = load_host(tolerate_bad_config=True)
    host.check_registered()
    core = host.config.core
    selected = {f"context-engine:{core.context.engine}",
                *(f"memory-provider:{name}" for name in core.memory.providers)}
    records = [{**r.as_dict(), "active": sorted(selected & set(r.registers))}
               for r in host.records.values()]
    if as_json:
        echo_json(records)
        return
    if not records:
        click.echo("No plugins found.")
        return
    width = max(len(str(r["name"])) for r in records)
    for r in records:
        status = "enabled" if r["enabled"] else "disabled"
        if r["error"]:
            status = click.style("error", fg="red")
        version = f" {r['version']}" if r["version"] else ""
        dist = f" ({r['distribution']}{version})" if r["distribution"] else ""
        kinds = ", ".join(r["registers"]) or "-"  # type: ignore[arg-type]
        click.echo(f"{r['name']!s:<{width}}  {r['source']:<11}  {status:<8}  {kinds}{dist}")
        if r["error"]:
            click.echo(f"{'':<{width}}  {r['error']}")
        for warning in r.get("warnings") or ():  # type: ignore[attr-defined]
            click.echo(f"{'':<{width}}  " + click.style("warning: ", fg="yellow") + str(warning))
    click.echo(f"\nactive: context engine {core.context.engine} (context.engine); memory "
               f"providers {', '.join(core.memory.providers) or 'none'} (memory.providers)")


def _installer_hint(specs: tuple[str, ...], verb: str) -> str | None:
    """When hermes-core runs from pipx or a uv tool, pip into it would be undone: say what to run."""
    prefix = Path(sys.prefix).as_posix()
    joined = " ".join(specs)
    if "/pipx/venvs/" in prefix:
        if verb == "install":
            return f"hermes-core was installed with pipx: run 'pipx inject hermes-core {joined}'"
        return f"hermes-core was installed with pipx: run 'pipx uninject hermes-core {joined}'"
    if "/uv/tools/" in prefix:
        withs = " ".join(f"--with {s}" for s in specs)
        if verb == "install":
            return (
                "hermes-core was installed with 'uv tool': run "
                f"'uv tool install --reinstall hermes-core {withs}'"
            )
        return "hermes-core was installed with 'uv tool': reinstall it without those --with packages"
    return None


def _pip(args: list[str]) -> int:
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        raise click.ClickException(
            f"pip is not available in the interpreter hermes-core runs in ({sys.executable}). "
            f"Run 'uv pip {' '.join(args)} --python {sys.executable}' or install pip there."
        )
    return subprocess.run([sys.executable, "-m", "pip", *args], check=False).returncode


@plugins.command("install")
@click.argument("specs", nargs=-1, required=True)
@click.option("-U", "--upgrade", is_flag=True, help="Upgrade if already installed.")
@click.option("-e", "--editable", is_flag=True, help="Install a local path in editable mode.")
def install(specs: tuple[str, ...], upgrade: bool, editable: bool) -> None:
    """Install plugin distributions (PyPI names or local paths) with pip.

    They go into the interpreter hermes-core itself runs in, so they are found at once.
    """
    hint = _installer_hint(specs, "install")
    if hint:
        raise click.ClickException(hint)
    args = ["install"]
    if upgrade:
        args.append("--upgrade")
    for spec in specs:
        if editable:
            args.append("-e")
        # A path that exists is passed absolute so pip never mistakes it for a PyPI name.
        args.append(str(Path(spec).resolve()) if os.path.exists(spec) else spec)
    from ..loader import install_problems, installed_distributions

    before = installed_distributions()
    code = _pip(args)
    if code != 0:
        raise click.ClickException(f"pip install failed (exit {code}); nothing was changed")
    problems = install_problems(before, installed_distributions())
    if problems:
        raise click.ClickException("pip installed it, but " + "\n".join(problems))
    click.echo("Installed. Run 'hermes-core plugins list' to see what they provide.")


@plugins.command("uninstall")
@click.argument("names", nargs=-1, required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def uninstall(names: tuple[str, ...], yes: bool) -> None:
    """Uninstall plugins by plugin name or distribution name (imports no plugin)."""
    from importlib import metadata

    from ..loader import BUILTIN_PLUGINS, entry_points

    dists: list[str] = []
    by_plugin = {ep.name: ep.dist.metadata["Name"] for ep in entry_points() if ep.dist is not None}
    for name in names:
        if name in BUILTIN_PLUGINS:
            raise click.ClickException(
                f"{name!r} is a built-in plugin, part of hermes-core; "
                f"disable it instead: hermes-core plugins disable {name}"
            )
        dist = by_plugin.get(name, name)
        known = sorted({*by_plugin, *by_plugin.values()})
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            raise click.ClickException(
                f"no installed plugin or distribution named {name!r}; nothing was uninstalled. "
                f"Installed plugins: {', '.join(known) or 'none'} ('hermes-core plugins list')"
            ) from None
        plugin_dists = {_pep503(d) for d in by_plugin.values()}
        if _pep503(dist) not in plugin_dists:  # a library, or the kernel itself: not ours to remove
            raise click.ClickException(
                f"{name!r} is installed but is not a hermes-core plugin distribution (it registers "
                f"no plugin); nothing was uninstalled. Installed plugins: "
                f"{', '.join(known) or 'none'} ('hermes-core plugins list')")
        dists.append(dist)
    hint = _installer_hint(tuple(dists), "uninstall")
    if hint:
        raise click.ClickException(hint)
    if not yes:
        if not sys.stdin.isatty():
            raise click.ClickException(
                f"not uninstalling {', '.join(dists)} without confirmation, and there is no "
                "terminal to ask on; pass -y (--yes) to uninstall without asking"
            )
        click.confirm(f"Uninstall {', '.join(dists)}?", abort=True)
    code = _pip(["uninstall", "-y", *dists])
    if code != 0:
        raise click.ClickException(f"pip uninstall failed (exit {code})")


def _pep503(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _known_names() -> set[str]:
    """Plugin and distribution names, found without importing any plugin."""
    from ..loader import discover
    from ..paths import plugins_dir

    names: set[str] = set()
    for c in discover(plugins_dir()):
        names.add(c.name)
        if c.distribution:
            names.add(c.distribution)
    return names


def _require_known(name: str) -> None:
    """A click error naming the known plugins (and the closest one) when ``name`` is none."""
    import difflib

    known = _known_names()
    if name in known:
        return
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise click.ClickException(
        f"no plugin named {name!r}.{hint} Known: {', '.join(sorted(known)) or 'none'}")


def _file_selection(path: Path) -> tuple[str, Any, list[str]]:
    """config.yaml's text, its ``plugins`` section as the file gives it (a bad value reads as its
    default) and every problem of the file's core sections. Only a file that cannot be edited
    (unreadable, malformed YAML, not a mapping) is refused: a problem elsewhere in the file must
    not keep a crashing plugin from being disabled."""
    from ..config import check_config_text, file_values_only
    from ..errors import ConfigError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc}") from None
    with file_values_only():  # the file's own values: the list is written back to the file
        loaded, problems = check_config_text(text, path)
    if loaded is None:
        raise ConfigError("\n".join(problems) + f"\n{path} was not changed: fix it by hand")
    return text, loaded.core.plugins, problems


def _set_disabled(name: str, disabled: bool) -> None:
    """Add ``name`` to (or drop it from) ``plugins.disabled``, whatever else the file has wrong:
    that key alone is edited (a list of names, valid by construction); what is still wrong is
    named after the write."""
    from ..config import check_config_text, file_values_only
    from ..config_edit import config_lock, edit_config_text, write_config_text
    from ..loader import DISABLE_ENV, blocked_names
    from ..paths import config_path

    path = config_path()
    with config_lock(path):  # the list is read and written back as one edit
        text, section, _problems = _file_selection(path)
        current = list(section.disabled)
        if disabled:
            if name in current:
                click.echo(f"{name} is already disabled.")
                return
            new = [*current, name]
        else:
            if name not in current:
                if name.lower() in blocked_names([]):
                    warn(f"{name} is blocked by ${DISABLE_ENV}; unset it there to enable it")
                else:
                    click.echo(f"{name} is not disabled.")
                return
            new = [n for n in current if n != name]
        new_text = edit_config_text(text, path, "plugins.disabled", new)
        with file_values_only():
            _after, problems = check_config_text(new_text, path)
        write_config_text(path, new_text)
    click.echo(f"{'Disabled' if disabled else 'Enabled'} {name} (in {path}).")
    if problems:
        warn(f"{path} still has other problems; commands that load the config refuse or ignore "
             "it until they are repaired (hermes-core config set KEY VALUE, or hermes-core "
             "config unset KEY for the default):\n  " + "\n  ".join(problems))


@plugins.command("disable")
@click.argument("name")
def disable(name: str) -> None:
    """Stop loading a plugin: it is not even imported from now on."""
    _require_known(name)
    _set_disabled(name, True)


@plugins.command("enable")
@click.argument("name")
def enable(name: str) -> None:
    """Load a disabled plugin again."""
    from ..loader import Candidate, allowed_names, is_blocked
    from ..paths import config_path

    if name not in _file_selection(config_path())[1].disabled:
        _require_known(name)  # a disabled, since removed one is fine
    _set_disabled(name, False)
    only = _file_selection(config_path())[1].enabled_only
    if is_blocked(Candidate(name=name, source="builtin"), set(), allowed_names(only)):
        warn(f"{name} is not in plugins.enabled_only ({', '.join(only or [])}), so it is still "
             f"not loaded; add it there: hermes-core config set plugins.enabled_only "
             f"'[{', '.join([*(only or []), name])}]'")
