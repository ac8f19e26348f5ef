"""``hermes-core context``: what the selected context engine sees and would do.

``estimate FILE.jsonl`` reads a history (one message per line, or a replay transcript: see
:mod:`hermes_core.history`) and ``show SESSION_ID`` reads a stored session through the memory
providers' ``load_session`` hook. Both activate the engine of ``context.engine`` (first-party or
not) and print its answer to the ``describe_context`` hook: its ``lines``, or the whole plan with
``--json``. No LLM is called and the engine changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._common import echo_json, load_host

if TYPE_CHECKING:
    from ..host import PluginHost
    from ..types import Message, Session

__all__ = ["context", "describe_with_engine"]


@click.group("context")
def context() -> None:
    """Inspect what the context engine would do with a history."""


def _start_engine(host: PluginHost) -> str:
    from ..errors import HermesCoreError

    host.validate_config()  # the whole file, as replay and chat check it: a typo is no default
    name = host.config.core.context.engine
    try:
        host.activate("context-engine", name, config_key="context.engine")
    except HermesCoreError:
        raise
    except Exception as exc:
        raise HermesCoreError(f"context engine {name!r} did not start: {exc}") from exc
    return name


def describe_with_engine(host: PluginHost, messages: list[Message],
                         session: Session | None) -> dict[str, Any]:
    """The active engine's plan for ``messages``; a clear error when it gives none."""
    from ..errors import HermesCoreError

    name = host.config.core.context.engine
    if host.engine is None:
        raise HermesCoreError("no context engine is active; set context.engine")
    plan = host.hooks.describe_context(messages=messages, session=session)
    if plan is not None:
        return plan
    hook = host.hooks.describe_context.__name__
    problems = [p for p in host.hooks.problems if p.hook == hook]
    if problems:
        raise HermesCoreError(f"the context engine {name!r} failed to describe its plan: "
                              f"{problems[-1].message}")
    raise HermesCoreError(
        f"the context engine {name!r} does not describe its plan (it does not implement the "
        "describe_context hook, or returned None)")


def _print(plan: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(plan)
        return
    for line in plan["lines"]:
        click.echo(line)


@context.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(session_id: str, as_json: bool) -> None:
    """Token estimate of a stored session and what the engine would do with it."""
    from ..errors import HermesCoreError

    host = load_host()
    try:
        host.activate_memory_providers()
        _start_engine(host)
        loaded, outcomes = host.hooks.load_session(platform="", conversation_key=None,
                                                   session_id=session_id)
        if loaded is None:
            failed = [o for o in outcomes if not o.ok]
            why = (f"; {failed[0].plugin} failed: {failed[0].error}" if failed else "")
            raise HermesCoreError(
                f"no session {session_id!r}: no active memory provider has it{why} (the memory "
                "providers of memory.providers that store sessions answer load_session; "
                "'hermes-core context estimate FILE.jsonl' reads a file instead)")
        session, messages = loaded
        plan = describe_with_engine(host, messages, session)
    finally:
        host.shutdown()
    plan = {**plan, "session_id": session.id}
    if session.id != session_id:
        plan["requested_session_id"] = session_id
        plan["lines"] = [f"session {session.id} (the newest of the compaction chain of "
                         f"{session_id})", *plan["lines"]]
    _print(plan, as_json)


@context.command("estimate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def estimate(file: Path, as_json: bool) -> None:
    """Token estimate of FILE and what the engine would do with it.

    FILE is JSONL: one message per line, or a replay transcript (a meta line, messages and
    new_session events; its last session is estimated).
    """
    from ..history import read_history

    history = read_history(file)
    host = load_host()
    try:
        _start_engine(host)
        plan = describe_with_engine(host, history.messages, None)
    finally:
        host.shutdown()
    if history.earlier_sessions:
        plan = {**plan, "earlier_sessions": history.earlier_sessions}
        plan["lines"] = [f"the last of {history.earlier_sessions + 1} sessions in {file.name}",
                         *plan["lines"]]
    _print(plan, as_json)
