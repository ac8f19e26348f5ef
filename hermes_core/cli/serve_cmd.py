"""``hermes-core serve``: the signed HTTP webhook (the ``webhook`` platform plugin)."""

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
def serve(bind_host: str | None, port: int | None) -> None:
    """Serve the agent over HTTP: POST a signed JSON message, get the reply.

    POST /messages and /messages/stream take {"conversation_key": ..., "text": ...}; each key is
    one conversation, kept across requests and restarts. Every request carries X-Hermes-Timestamp
    and X-Hermes-Signature (HMAC-SHA256 of "<timestamp>." + body with the shared secret,
    HERMES_CORE_WEBHOOK_SECRET or webhook.secret). See docs/platforms.md. Ctrl-C stops.
    """
    from ..dispatch import connect_platform, disconnect_platform
    from ..types import EndReason
    from ._common import load_host
    from .chat_cmd import require_api_key

    host = load_host()
    stop = threading.Event()

    def configure(platform: Any) -> None:
        platform.listen_on(bind_host, port)
        platform.secret()  # no secret: refuse before anything starts
        require_api_key(host, "serve")

    try:
        platform: Any
        platform, dispatcher = connect_platform(host, "webhook", configure=configure)
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        click.echo(f"hermes-core webhook listening on {platform.url} "
                   "(POST /messages, POST /messages/stream, GET /health); Ctrl-C stops.")
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
