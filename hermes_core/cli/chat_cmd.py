"""``hermes-core chat``: talk to the agent in the terminal (the ``cli`` platform plugin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["NO_KEY_EXIT", "chat", "require_api_key"]

#: the exit status when no API key is configured (scripts can tell it from other failures)
NO_KEY_EXIT = 3


class NoKeyError(click.ClickException):
    exit_code = NO_KEY_EXIT


def require_api_key(host: PluginHost, command: str) -> None:
    """Refuse to start a live front end whose model client cannot answer (no key: exit 3, and
    say what works without one; an unknown client; a model without tool calls), and warn about
    what should be fixed (an unknown context window)."""
    from ..errors import HermesCoreError
    from ..models import check_model

    try:
        check = check_model(host, "main")
    except HermesCoreError as exc:  # an unknown llm.client lists the installed ones
        raise click.ClickException(str(exc)) from exc
    if check.unavailable:
        raise NoKeyError(
            f"'{command}' talks to the model and {check.unavailable}. To see the plugins at work "
            "without a key, replay a recorded conversation: "
            "'hermes-core replay examples/first-week.jsonl'.")
    if check.refused:
        raise click.ClickException(check.refused)
    for warning in check.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command("chat")
@click.option("-c", "--continue", "resume", is_flag=True,
              help="Resume the terminal session used last instead of starting a new one.")
def chat(resume: bool) -> None:
    """Chat with the agent in the terminal; replies stream as they are written.

    Commands: /new, /compress [focus], /memory, /search WORDS, /plugins, /quit (or Ctrl-D).
    Every message is archived like any platform's; 'chat --continue' picks up where you left off.
    Exits with status 3 when no API key is configured.
    """
    from ..dispatch import connect_platform, disconnect_platform
    from ..types import EndReason
    from ._common import load_host

    host = load_host()
    try:
        require_api_key(host, "chat")
        platform: Any
        platform, dispatcher = connect_platform(host, "cli")
        try:
            platform.run(host, resume=resume)
        finally:
            disconnect_platform(host, platform, dispatcher, EndReason.USER_EXIT)
    finally:
        host.shutdown()
