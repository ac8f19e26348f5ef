"""The built-in HTTP webhook: ``hermes-core serve``.

``POST /messages`` with a signed JSON body ``{"conversation_key": ..., "text": ...}`` runs one turn
and answers ``{"reply": ...}``; ``POST /messages/stream`` answers with server-sent events as the
reply is produced. Each conversation key is one session, kept across requests and restarts (the
kernel's dispatcher resumes it from the archive). The signature scheme is in :mod:`.signing`; the
routes and their checks in :mod:`.app`; the uvicorn thread in :mod:`.server`.

Importing this module is cheap: starlette and uvicorn are imported when the server starts, so
``hermes-core --help`` and ``plugins list`` never pay for them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl
from hermes_core.errors import HermesCoreError
from hermes_core.kinds import Platform, PluginContext
from hermes_core.types import ForgetReport

from .config import MIN_SECRET_CHARS, SECRET_ENV, WebhookConfig, secret_problem
from .server import WebhookStartError, is_loopback
from .signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    SignatureError,
    sign,
    sign_standard,
    signed_headers,
    verify,
    verify_request,
)

if TYPE_CHECKING:
    from hermes_core.dispatch import ConversationDispatcher

    from .deliveries import Deliveries
    from .replays import SharedReplayGuard
    from .server import WebhookServer

__all__ = [
    "MIN_SECRET_CHARS",
    "SECRET_ENV",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WEBHOOK_ID_HEADER",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "SignatureError",
    "WebhookConfig",
    "WebhookPlatform",
    "WebhookSendError",
    "WebhookStartError",
    "forget",
    "is_loopback",
    "register_platforms",
    "sign",
    "sign_standard",
    "signed_headers",
    "verify",
    "verify_request",
]


class WebhookSendError(HermesCoreError):
    """``send`` could not deliver: no ``webhook.outbound_url``, or the receiver failed."""


class WebhookPlatform(Platform):
    """Serves the dispatcher over signed HTTP (see the module docstring)."""

    name = "webhook"
    Config = WebhookConfig
    description = "signed HTTP webhook: POST a message, get the reply (hermes-core serve)"
    listens = True

    def __init__(self, config: WebhookConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.settings: WebhookConfig = config
        self.server: WebhookServer | None = None
        self.deliveries: Deliveries | None = None
        self._stop_sweeping = threading.Event()

    def listen_on(self, host: str | None = None, port: int | None = None) -> None:
        """Override ``webhook.host`` / ``webhook.port`` (``serve --host/--port``)."""
        update: dict[str, Any] = {}
        if host is not None:
            update["host"] = host
        if port is not None:
            update["port"] = port
        self.settings = WebhookConfig.model_validate({**self.settings.model_dump(), **update})

    def secret(self) -> str:
        """The signing secret, or a :class:`WebhookStartError` saying how to set one."""
        value = self.settings.secret.get_secret_value() if self.settings.secret else ""
        if not value:
            raise WebhookStartError(
                f"the webhook needs a signing secret and none is set: export {SECRET_ENV}=... "
                "(or set webhook.secret in config.yaml). Make one with: python -c "
                "'import secrets; print(secrets.token_hex(32))'"
            )
        problem = secret_problem(value)  # the same rule config validation applies
        if problem:
            raise WebhookStartError(problem)
        return value

    def check_ready(self) -> None:
        """No signing secret, or a short one: refuse before anything starts."""
        self.secret()

    def dispatcher_options(self) -> dict[str, Any]:
        """How the front end should size the dispatcher for this platform."""
        return {"max_agents": self.settings.max_live_conversations,
                "idle_seconds": self.settings.idle_minutes * 60,
                "max_concurrent_turns": self.settings.max_concurrent_turns}

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    # --------------------------------------------------------------------------------- hooks

    @hookimpl
    def connect(self, dispatcher: ConversationDispatcher) -> None:
        secret = self.secret()  # before anything starts: no secret, no server
        from .app import build_app  # starlette: only when serving
        from .server import WebhookServer

        deliveries = self._deliveries()
        app = build_app(dispatcher, self.settings, secret, self._replay_guard(), deliveries)
        server = WebhookServer(app, self.settings.host, self.settings.port,
                               shutdown_seconds=self.settings.shutdown_seconds,
                               header_timeout=self.settings.header_timeout_seconds,
                               max_pending_connections=self.settings.max_pending_connections,
                               body_timeout=self.settings.body_timeout_seconds)
        server.start()
        self.server = server
        self._stop_sweeping.clear()
        interval = max(1.0, min(60.0, self.settings.idle_minutes * 15))  # a quarter of the idle time
        threading.Thread(target=self._sweep, args=(dispatcher.sweep, interval),
                         name="webhook-sweeper", daemon=True).start()

    def _replay_guard(self) -> SharedReplayGuard | None:
        """With ``storage.url`` every node of the service shares one replay memory (the
        database); without, the app keeps its own in memory."""
        from hermes_core.storage import resolve_storage_url

        storage = getattr(self.context.config, "storage", None)
        url = resolve_storage_url(getattr(storage, "url", None))
        if url is None:
            return None
        from .replays import SharedReplayGuard

        guard = SharedReplayGuard(url, self.settings.max_skew_seconds)
        guard.open()  # an unreachable or foreign database stops serve here, clearly
        return guard

    def _deliveries(self) -> Deliveries | None:
        """The idempotency records (``webhook.db`` in the home, or the ``storage.url``
        database); none with ``webhook.idempotency_hours: 0``."""
        if not self.settings.idempotency_hours:
            return None
        from hermes_core.storage import resolve_storage_url

        from .deliveries import Deliveries

        storage = getattr(self.context.config, "storage", None)
        url = resolve_storage_url(getattr(storage, "url", None))
        deliveries = (Deliveries(url=url, retention_hours=self.settings.idempotency_hours)
                      if url is not None else
                      Deliveries(home=self.context.home,
                                 retention_hours=self.settings.idempotency_hours))
        try:
            deliveries.open()  # a broken or foreign store stops serve here, clearly
        except HermesCoreError as exc:
            raise WebhookStartError(str(exc)) from None
        except Exception as exc:
            raise WebhookStartError(f"cannot open the webhook's delivery records: "
                                    f"{type(exc).__name__}: {exc}") from None
        self.deliveries = deliveries
        return deliveries

    def _sweep(self, sweep: Callable[[], int], interval: float) -> None:
        while not self._stop_sweeping.wait(interval):
            try:
                sweep()
            except Exception as exc:  # never let the sweeper die silently
                self.context.logger.error("closing idle conversations failed: %s", exc)

    @hookimpl
    def disconnect(self) -> None:
        self._stop_sweeping.set()
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.deliveries is not None:
            self.deliveries.close()
            self.deliveries = None

    def can_send(self) -> bool:
        """Agent-initiated messages (notices) are delivered when webhook.outbound_url is set."""
        return bool(self.settings.outbound_url)

    @hookimpl
    def send(self, conversation_key: str, text: str) -> dict[str, Any]:
        """POST ``{"conversation_key", "text"}`` to ``webhook.outbound_url``, signed like requests."""
        url = self.settings.outbound_url
        if not url:
            raise WebhookSendError("the webhook cannot start a conversation by itself: set "
                                   "webhook.outbound_url to the URL that should receive the message")
        import httpx

        body = json.dumps({"conversation_key": conversation_key, "text": text},
                          ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", **signed_headers(self.secret(), body)}
        try:
            response = httpx.post(url, content=body, headers=headers, timeout=10.0)
        except httpx.HTTPError as exc:
            raise WebhookSendError(f"delivering to {url} failed: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 300:
            raise WebhookSendError(f"{url} answered {response.status_code}: {response.text[:200]}")
        return {"status": response.status_code}


@hookimpl
def register_platforms(register: Callable[[type], None]) -> None:
    register(WebhookPlatform)


@hookimpl
def forget(subject: str, scope: str, dry_run: bool) -> ForgetReport | None:
    """The answers kept for retried messages (see :mod:`.deliveries`) that mention ``subject``
    are erased. They are not kept per user: a user-scoped forget (``user:<key>``) deletes none
    and says so (it must neither erase nor reveal other users' answers), as the hook's contract
    asks of what cannot tell users apart."""
    from hermes_core.config import load_config
    from hermes_core.paths import home_dir
    from hermes_core.storage import resolve_storage_url

    from .deliveries import Deliveries

    url = resolve_storage_url(load_config().core.storage.url)
    deliveries = Deliveries(url=url) if url is not None else Deliveries(home=home_dir())
    if not deliveries.exists():
        return None
    if scope != "all":
        return ForgetReport("webhook", dry_run=dry_run, cannot_delete=(
            "the answers kept for retried messages are not kept per user; forget with scope "
            "'all' to erase them (they are deleted anyway after webhook.idempotency_hours)"))
    deliveries.open()
    try:
        hits = deliveries.erase_mentions(subject, dry_run=dry_run)
    finally:
        deliveries.close()
    return ForgetReport("webhook", matched=len(hits), deleted=0 if dry_run else len(hits),
                        dry_run=dry_run,
                        items=[f"the answer kept for message {h!r}" for h in hits])
