"""``hermes-core serve``: run a listening platform; by default the signed HTTP webhook."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

__all__ = ["serve"]


@click.command("serve")
@click.option("--host", "bind_host", metavar="ADDRESS", default=None,
              help="Address to listen on (default webhook.host, 127.0.0.1). Anything but loopback "
                   "makes the agent reachable from the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port (default webhook.port, 8787; 0 picks a free one).")
@click.option("--platform", "platform_name", default="webhook", show_default=True, metavar="NAME",
              help="The platform plugin to run (a chat-service adapter installed as a plugin).")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False), default=None,
              help="Level of the log file logs/hermes-core.log (default logging.level, INFO).")
def serve(bind_host: str | None, port: int | None, platform_name: str,
          log_level: str | None) -> None:
    """Serve the agent over HTTP: POST a signed JSON message, get the reply.

    POST /messages and /messages/stream take {"conversation_key": ..., "text": ...}; each key is
    one conversation, kept across requests and restarts. Every request is signed the Standard
    Webhooks way: webhook-id, webhook-timestamp and webhook-signature ("v1," + base64 HMAC-SHA256
    of "<id>.<timestamp>." + body with the shared secret, HERMES_CORE_WEBHOOK_SECRET or
    webhook.secret); X-Hermes-Timestamp/X-Hermes-Signature also work. See docs/platforms.md.
    Ctrl-C stops.
    """
    from .._logfile import setup_file_log
    from ..dispatch import connect_platform, disconnect_platform
    from ..paths import home_dir
    from ..types import EndReason
    from ._common import load_host
    from .chat_cmd import require_api_key

    if log_level is not None:
        import logging

        for handler in list(logging.getLogger("hermes_core").handlers):
            if getattr(handler, "hermes_core_file", False):
                logging.getLogger("hermes_core").removeHandler(handler)
                handler.close()
        logging.getLogger("hermes_core").setLevel(log_level.upper())
        setup_file_log(home_dir(), level=log_level)

    host = load_host()
    stop = threading.Event()

    def configure(platform: Any) -> None:
        from ..deprecations import check_platform_ready, platform_listens

        if platform_listens(platform):
            platform.listen_on(bind_host, port)
        elif bind_host is not None or port is not None:
            raise click.UsageError(f"--host/--port do not apply to the {platform_name!r} platform, "
                                   "which does not listen on a port; leave them out")
        check_platform_ready(platform)  # e.g. a signing platform without its secret: refuse now
        require_api_key(host, "serve")

    try:
        platform: Any
        platform, dispatcher = connect_platform(host, platform_name, configure=configure)
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        url = getattr(platform, "url", None)
        if isinstance(url, str) and url:
            click.echo(f"hermes-core {platform_name} listening on {url} "
                       "(POST /messages, POST /messages/stream, GET /health); Ctrl-C stops.")
        else:
            click.echo(f"hermes-core {platform_name} connected; Ctrl-C stops.")
        try:
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            click.echo("stopping: replies in flight finish first", err=True)
            disconnect_platform(host, platform, dispatcher, EndReason.SHUTDOWN)
    finally:
        host.shutdown()
