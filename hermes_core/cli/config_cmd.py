"""``hermes-core config``: show, get, set, unset, validate, path."""

from __future__ import annotations

from typing import Any

import click
import yaml

from ._common import echo_json, load_host, warn

__all__ = ["config"]


@click.group()
def config() -> None:
    """Read, change and check config.yaml."""


def _effective(host: Any) -> dict[str, Any]:
    from ..config import effective_dict, redacted

    defaults = []
    for section, (_name, _model, _plugin) in host.registries.config_owners().items():
        if section not in host.config.raw:
            try:
                defaults.append((section, host._section_model(section, host.config)))
            except Exception:  # a model that needs values has no defaults to show
                continue
    data: dict[str, Any] = redacted(_plain(effective_dict(host.config, defaults)))
    return data


def _plain(value: Any) -> Any:
    """Pydantic values (SecretStr, nested models) to plain data, secrets kept as SecretStr."""
    from pydantic import BaseModel, SecretStr

    if isinstance(value, SecretStr):
        return value
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@config.command("path")
def path() -> None:
    """Print where config.yaml is."""
    from ..paths import config_path

    click.echo(str(config_path()))


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def show(as_json: bool) -> None:
    """Show the effective config (defaults filled in, secrets redacted)."""
    data = _effective(load_host())
    if as_json:
        echo_json(data)
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)


@config.command("get")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print the value as JSON.")
def get(key: str, as_json: bool) -> None:
    """Print one value, by dotted key (e.g. context.engine)."""
    from ..config import get_dotted

    data = _effective(load_host())
    try:
        value = get_dotted(data, key)
    except KeyError as exc:
        raise click.ClickException(
            f"no key {key!r} in the config (missing part: {exc.args[0]!r}); "
            "see 'hermes-core config show' for what exists"
        ) from None
    if as_json or isinstance(value, (dict, list)):
        echo_json(value)
    else:
        click.echo("null" if value is None else str(value))


def _validator(host: Any, key: str | None = None) -> Any:
    from ..config import key_problems
    from ..errors import ConfigError

    def validate(loaded: Any) -> None:
        host.validate_change(host.config, loaded)
        if key is not None:
            # The section may have been invalid already; the value being set must still be right.
            own = key_problems(loaded, key, host.registries.config_owners())
            if own:
                raise ConfigError("\n".join(own) + "\nconfig.yaml was not changed.")

    return validate


def _edit(key: str, value: Any, *, unset: bool) -> Any:
    """Set or unset ``key``, judged by the loaded plugins; returns config.yaml's path.

    When config.yaml already fails the core checks (a bad value, say ``llm.max_tokens: abc``),
    the edit may be its repair: the plugins are loaded with the file's other values, and the
    edit is written only if the file it gives passes every check."""
    from ..config import check_config_text, file_values_only, parse_config_text
    from ..config_edit import edit_config_text, set_config_value
    from ..errors import ConfigError
    from ..paths import config_path

    try:
        host = load_host()
    except ConfigError as problem:
        path = config_path()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise problem from None
        before, _errors = check_config_text(text, path)
        if before is None:  # malformed YAML, not a mapping: only an edit by hand can fix it
            raise problem from None
        new = edit_config_text(text, path, key, value, unset=unset)
        try:
            with file_values_only():
                parse_config_text(new, path)
        except ConfigError as exc:
            raise ConfigError(
                f"{exc}\nconfig.yaml was not changed: a change is written only once the file "
                "passes this check. Repair that key first: hermes-core config set KEY VALUE (a "
                "valid value), or hermes-core config unset KEY (its default).") from None
        host = load_host(config=before)
    set_config_value(host.config.path, key, value, unset=unset,
                     validate=_validator(host, None if unset else key))
    return host.config.path


@config.command("set")
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Set KEY to VALUE (parsed as YAML: 3, true, [a, b]); refused changes leave the file as is."""
    from ..config_edit import parse_cli_value

    path = _edit(key, parse_cli_value(value), unset=False)
    click.echo(f"Set {key} in {path}.")


@config.command("unset")
@click.argument("key")
def unset(key: str) -> None:
    """Remove KEY from config.yaml so its default applies again."""
    from ..config import get_dotted
    from ..paths import config_path

    path = config_path()
    data: Any = None  # unreadable, malformed: the edit names what is wrong with the file
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data = {} if data is None else data
    except FileNotFoundError:
        data = {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        pass
    if isinstance(data, dict):
        try:
            get_dotted(data, key)
        except KeyError:
            click.echo(f"{key} is not set in {path}; nothing changed (its default applies).")
            return
    path = _edit(key, None, unset=True)
    click.echo(f"Unset {key} in {path}.")


@config.command("validate")
@click.option("--json", "as_json", is_flag=True, help="Print {valid, errors, plugin_errors, warnings}.")
def validate(as_json: bool) -> None:
    """Check config.yaml against the core and every plugin's model; exit 1 if invalid."""
    from ..config_edit import ConfigReport, check_config_file_text
    from ..paths import config_path

    path = config_path()
    try:
        report = check_config_file_text(path.read_text(encoding="utf-8"), path)
    except FileNotFoundError:
        report = check_config_file_text("", path)
    except (OSError, UnicodeDecodeError) as exc:
        report = ConfigReport(errors=[f"{path}: cannot read the config file: {exc}"])
    errors, plugin_errors, warnings = report.errors, report.plugin_errors, report.warnings
    if as_json:
        echo_json({"valid": not errors, "path": str(config_path()), "errors": errors,
                   "plugin_errors": plugin_errors, "warnings": warnings})
    else:
        for line in plugin_errors:
            warn(f"plugin {line}")
        for line in warnings:
            warn(line)
        if errors:
            for line in errors:
                click.echo(line, err=True)
        else:
            click.echo(f"{config_path()} is valid.")
    if errors:
        raise SystemExit(1)
