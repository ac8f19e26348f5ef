"""``hermes-core context``: what the context engine sees and would do.

``estimate FILE.jsonl`` reads a history (one message per line) and ``show SESSION_ID`` reads a
stored session from the session archive (``state.db``); both print the token estimate, the
compaction threshold and what a compaction would keep, using the ``compression:`` settings of
config.yaml. No LLM is called and nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import echo_json

__all__ = ["context"]


@click.group("context")
def context() -> None:
    """Inspect what the context engine would do with a history."""


def _compressor() -> Any:
    import logging

    from ..config import format_validation_error, load_config
    from ..errors import ConfigError
    from ..kinds import PluginContext
    from ..paths import home_dir
    from ..plugins.context_engine.compressor import Compressor

    loaded = load_config()
    raw = loaded.raw.get(Compressor.config_section) or {}
    from pydantic import ValidationError

    try:
        settings = Compressor.Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            format_validation_error(exc, section=Compressor.config_section, where=loaded)
        ) from None
    ctx = PluginContext(
        plugin_name="compressor",
        home=home_dir(),
        config=loaded.core,
        logger=logging.getLogger("hermes_core.cli.context"),
    )
    return Compressor(settings, ctx, llm=None)


def _line(label: str, part: dict[str, Any]) -> str:
    if not part.get("messages"):
        return f"  {label:<8} none"
    return (
        f"  {label:<8} messages {part['first']}-{part['last']} ({part['messages']}), "
        f"{part['tokens']} tokens"
    )


def _report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(report)
        return
    c = report["compaction"]
    state = "over" if report["over_threshold"] else "under"
    click.echo(
        f"{report['messages']} messages, about {report['tokens']} tokens "
        f"({report['usage_percent']}% of a {report['context_window']}-token window, "
        f"from {report['context_window_source']})"
    )
    click.echo(
        f"threshold {report['threshold']} = {report['threshold_tokens']} tokens: {state} it"
    )
    if c["nothing_to_compact"]:
        click.echo(f"a compaction would change nothing: {c['nothing_to_compact']}")
        return
    click.echo("a compaction would keep:")
    click.echo(_line("head", c["head"]))
    pins = c["pinned"]
    if pins["indices"]:
        click.echo(f"  {'pinned':<8} messages {pins['indices']}, {pins['tokens']} tokens")
    click.echo(_line("tail", c["tail"]))
    middle = c["middle"]
    click.echo(
        f"and summarise {middle['summarised']} messages ({middle['tokens']} tokens) into about "
        f"{c['summary_budget_tokens']} tokens, clearing {c['old_tool_outputs_cleared']} old tool "
        f"output(s): about {c['tokens_after_estimate']} tokens after"
    )


@context.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(session_id: str, as_json: bool) -> None:
    """Token estimate of a stored session and what a compaction would keep."""
    from ..paths import home_dir
    from ..plugins.context_engine.compressor.estimate import describe_compaction, message_from_dict

    path = home_dir() / "state.db"
    if not path.is_file():
        raise click.ClickException(
            f"no session archive at {path}: sessions are stored by the session_archive memory "
            "provider (add it to memory.providers), or use 'hermes-core context estimate FILE.jsonl'"
        )
    from ..plugins.memory.session_archive.store import SessionArchive

    with SessionArchive(path) as archive:
        stored = archive.messages(session_id)
    messages = [
        message_from_dict(
            {"role": m.role, "content": m.content, "tool_calls": m.tool_calls,
             "tool_call_id": m.tool_call_id, "tool_name": m.tool_name,
             "timestamp": m.timestamp, "meta": m.meta},
            f"session {session_id}, message {m.id}",
        )
        for m in stored
    ]
    report = describe_compaction(_compressor(), messages)
    report["session_id"] = session_id
    _report(report, as_json)


@context.command("estimate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def estimate(file: Path, as_json: bool) -> None:
    """Token estimate of FILE (JSONL, one message per line) and what a compaction would keep."""
    from ..plugins.context_engine.compressor.estimate import describe_compaction, read_jsonl

    messages = read_jsonl(file)
    _report(describe_compaction(_compressor(), messages), as_json)
