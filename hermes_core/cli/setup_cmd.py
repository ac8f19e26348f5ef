"""``hermes-core setup``: the first run, and ``setup --check``.

Every question is also a flag, so scripts run it with ``--yes`` (no prompt at all). The logic is
in :mod:`hermes_core.firstrun`; this module asks and prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._common import echo_json, load_host, warn

if TYPE_CHECKING:
    from ..firstrun import Catalog, ClientInfo
    from ..host import PluginHost

__all__ = ["setup"]


class _Asker:
    """Prompts, or (with --yes) the defaults; a question with no default and no flag fails
    naming its flag, and so does a prompt whose input ends (no terminal, nothing piped)."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive

    def __call__(self, text: str, flag: str, default: Any = None, **kwargs: Any) -> Any:
        if not self.interactive:
            if default is None:
                raise click.UsageError(f"{text}: no default; pass {flag}")
            proc = kwargs.get("value_proc")
            return proc(default) if proc else default
        try:
            return click.prompt(text, default=default, **kwargs)
        except click.Abort as exc:
            if isinstance(exc.__context__, EOFError):  # the input ended: no terminal to ask
                raise click.UsageError(f"no answer to {text!r} (the input ended, no terminal): "
                                       f"pass {flag}, or --yes to take the defaults") from None
            raise


def _names(kind: str, valid: list[str], flag: str) -> Any:
    """A value_proc checking names against ``valid`` (a bad one is asked again at a prompt)."""

    def proc(value: Any) -> list[str]:
        names = value if isinstance(value, list) else [
            n.strip() for n in str(value).replace(",", " ").split() if n.strip()]
        bad = [n for n in names if n not in valid]
        if bad:
            raise click.BadParameter(f"unknown {kind} {', '.join(map(repr, bad))}; valid: "
                                     f"{', '.join(valid) or 'none installed'}", param_hint=flag)
        return names

    return proc


def _one(kind: str, valid: list[str], flag: str) -> Any:
    many = _names(kind, valid, flag)

    def proc(value: Any) -> str:
        names = many(value)
        if len(names) != 1:
            raise click.BadParameter(f"give one {kind}", param_hint=flag)
        return str(names[0])

    return proc


def _show(title: str, choices: list[Any]) -> None:
    click.echo(f"\n{title}:")
    for c in choices:
        about = f" - {c.description}" if c.description else ""
        click.echo(f"  {c.name}  ({c.origin}){about}")


def _given(value: Any, proc: Any) -> Any:
    try:
        return proc(value)
    except click.BadParameter as exc:
        raise click.UsageError(exc.format_message()) from None


def _pick_one(ask: _Asker, kind: str, title: str, choices: list[Any], given: str | None,
              flag: str, default: str) -> str:
    """One name among ``choices``: the flag's (checked), or asked after listing them."""
    proc = _one(kind, [c.name for c in choices], flag)
    if given is not None:
        return str(_given(given, proc))
    if ask.interactive:
        _show(title, choices)
    return str(ask(kind[0].upper() + kind[1:], flag, default=default, value_proc=proc))


def _ask_answers(host: PluginHost, offer: Catalog, flags: dict[str, Any], ask: _Asker
                 ) -> tuple[Any, ClientInfo]:
    from ..firstrun import Answers, client_info

    core = host.config.core
    client = _pick_one(ask, "model client", "Model clients", offer.clients, flags["client"],
                       "--client", core.llm.client)
    info = client_info(host.registries, client)
    default_model = core.llm.model if client == core.llm.client else info.default_model
    model = flags["model"] or ask(f"Model ({client})", "--model", default=default_model)
    base_url = flags["base_url"]
    if base_url is None and ask.interactive and info.base_url_setting:
        base_url = ask("Base URL (- for the client's default endpoint)", "--base-url",
                       default=_current(host, info.base_url_setting) or "-")
        base_url = "" if base_url == "-" else base_url
    key_env = flags["api_key_env"]
    if key_env is not None and info.key_env_setting is None and key_env != info.key_env:
        fixed = f"it reads {info.key_env} only" if info.key_env else "it needs no key"
        raise click.UsageError(f"--api-key-env {key_env}: client {client!r} cannot take another "
                               f"variable ({fixed})")
    if key_env is None and info.key_env_setting:
        key_env = ask("Environment variable holding the API key", "--api-key-env",
                      default=_current(host, info.key_env_setting) or info.key_env)
    api_key = None
    if flags["store_key"]:
        api_key = _key_to_store(info, key_env or info.key_env, ask)
    if flags["provider"]:
        providers = _given(list(flags["provider"]),
                           _names("memory provider", offer.names("providers"), "--provider"))
    else:
        if ask.interactive:
            _show("Memory providers", offer.providers)
        providers = ask("Memory providers, in order (comma-separated)", "--provider",
                        default=", ".join(core.memory.providers),
                        value_proc=_names("memory provider", offer.names("providers"),
                                          "--provider"))
    embedder = _pick_one(ask, "embedder", "Embedders (semantic search)", offer.embedders,
                         flags["embedder"], "--embedder", core.embeddings.embedder)
    scope = flags["scope"] or ask("Memory scope (global: one memory; user: one per user)",
                                  "--scope", default=core.memory.scope,
                                  type=click.Choice(["global", "user"]))
    return Answers(client=client, model=model, providers=providers, embedder=embedder,
                   scope=scope, base_url=base_url, api_key_env=key_env, api_key=api_key), info


def _current(host: PluginHost, dotted: str) -> str | None:
    from ..config import get_dotted

    try:
        value = get_dotted(host.config.raw, dotted)
    except KeyError:
        return None
    return str(value) if value else None


def _key_to_store(info: ClientInfo, env: str | None, ask: _Asker) -> str:
    if info.key_setting is None:
        raise click.UsageError(f"--store-key: client {info.name!r} has no key setting")
    if env and os.environ.get(env):
        return os.environ[env]
    return str(ask(f"API key to store in config.yaml ({env or 'no variable'} is not set)",
                   f"--store-key with {env or 'the key'} set", hide_input=True))


def _read_old(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}; nothing was written") from None


@click.command()
@click.option("--client", help="The model client (a registered llm-client name).")
@click.option("--model", help="The model name the client asks for.")
@click.option("--base-url", help="The client's endpoint ('' for its default).")
@click.option("--api-key-env", help="The environment variable holding the API key.")
@click.option("--store-key", is_flag=True,
              help="Write the key (from the variable, else asked) into config.yaml, mode 0600.")
@click.option("--provider", "provider", multiple=True,
              help="A memory provider, in order (repeat the flag for several).")
@click.option("--embedder", help="The embedder: a registered name, 'auto' or 'none'.")
@click.option("--scope", type=click.Choice(["global", "user"]), help="memory.scope.")
@click.option("--yes", "--non-interactive", "-y", "yes", is_flag=True,
              help="Ask nothing: defaults for what no flag gives, replace the file after showing "
                   "the diff.")
@click.option("--check", is_flag=True,
              help="Only check the config: the model answers one tiny request, the providers "
                   "start.")
@click.option("--timeout", default=20.0, show_default=True, type=click.FloatRange(0.1, 600),
              help="Seconds --check waits for the model.")
@click.option("--json", "as_json", is_flag=True,
              help="Print as JSON what can be chosen (with --check: the checks); writes nothing.")
def setup(check: bool, timeout: float, as_json: bool, yes: bool, **flags: Any) -> None:
    """Write config.yaml by answering a few questions (every one is also a flag).

    Picks the model client and model, the API key's environment variable (a key is written only
    with --store-key), the memory providers, the embedder and memory.scope. An existing file is
    shown as a diff, kept as config.yaml.bak, and replaced only when you agree (or --yes).
    'hermes-core setup --check' then checks that the model answers and the providers start.
    """
    if check:
        _run_check(timeout, as_json)
        return
    from .. import firstrun
    from ..paths import config_path

    if as_json:
        host = load_host(tolerate_bad_config=True)
        try:
            echo_json(firstrun.catalog(host).as_dict())
        finally:
            host.hooks.close()
        return
    path = config_path()
    old = _read_old(path)
    base = old or ""
    malformed = None if old is None else firstrun.malformed_reason(old, path)
    if malformed is not None:
        bak = firstrun.backup_path(path, old).name
        if not yes:
            raise click.ClickException(
                f"{malformed}\nsetup keeps what is there: fix the file, or run 'hermes-core "
                f"setup --yes' to replace it (the old file is kept as {bak})")
        warn(f"{path} is malformed; it is replaced, the old file kept as {bak}")
        base = ""
    host = load_host(tolerate_bad_config=True, warn_config=old is not None and malformed is None)
    try:
        answers, info = _ask_answers(host, firstrun.catalog(host), flags, _Asker(not yes))
    finally:
        host.hooks.close()
    new = firstrun.render_config(base, path, answers, info)
    if old is not None and new == old:
        click.echo(f"{path} already says this; nothing changed.")
        return
    for problem in firstrun.new_problems(path, old, new):
        warn(f"left as it was: {problem}")
    if old is not None:
        click.echo(f"\n{path} exists; the changes:\n{firstrun.config_diff(old, new, path)}",
                   nl=False)
        if not yes and not _confirm(f"Replace {path.name}?"):
            click.echo("Nothing written.")
            return
    backup = firstrun.write_config(path, old, new)
    click.echo(f"Wrote {path}" + (f" (the old file is {backup})" if backup else "") + ".")
    if answers.api_key is not None:
        click.echo(f"The API key is stored in {path} (mode 0600); the environment variable "
                   f"{info.key_env or ''} is safer: unset {info.key_setting} to go back to it.")
    elif info.key_env:
        env = answers.api_key_env or info.key_env
        state = "is set" if os.environ.get(env) else "is NOT set: export it before 'chat'"
        click.echo(f"The key is read from ${env}, which {state}.")
    click.echo("Next: 'hermes-core setup --check' checks that the model answers and the "
               "providers start.")


def _confirm(text: str) -> bool:
    try:
        return click.confirm(text, default=False)
    except click.Abort as exc:
        if isinstance(exc.__context__, EOFError):
            raise click.UsageError("no answer to the replace question (the input ended, no "
                                   "terminal): pass --yes to replace the file") from None
        raise


def _run_check(timeout: float, as_json: bool) -> None:
    from ..firstrun import model_check
    from .doctor_cmd import activation_check, embedder_check, report_checks

    host = load_host()
    try:
        checks = [model_check(host, timeout=timeout)]
        problems = [msg for _key, msg in host.config_problems()]
        if problems:
            checks.append({"name": "selections", "ok": False, "detail": "\n".join(problems)})
        else:
            checks.append(activation_check(host))
        checks.append(embedder_check(host))
    finally:
        host.shutdown()  # closes the model client too
    report_checks(checks, as_json)
