"""The Hermes ``MemoryProvider`` that serves hermes-core's stack (needs hermes-agent installed).

One hermes-core :class:`~hermes_core.host.PluginHost` per provider object, loaded from the
hermes-core home (``$HERMES_CORE_HOME``, default ``~/.hermes-core``) at ``initialize``. What each
Hermes call becomes:

* ``initialize`` / ``on_session_switch``: a hermes-core :class:`~hermes_core.types.Session`
  (Hermes' session id, platform and, with ``memory.scope: user``, its ``user_id``), announced with
  ``on_session_switch``;
* ``system_prompt_block``: every provider's block, each under its name;
* ``prefetch``: hermes-core's :class:`~hermes_core.prefetch.PrefetchRunner`, every provider at
  once under ``memory.prefetch_timeout`` (a late one gives its last answer, a hung one never holds
  the turn); each answer under its provider's name (Hermes adds the fence);
* ``sync_turn``: the two messages into the archive (``on_message``) and ``sync_turn`` to every
  provider (Hermes already calls it on its own background thread);
* tools: the stack's tools except those Hermes has its own of (the curated memory and skills),
  each named ``hermes_core_<name>`` so none shadows a Hermes tool; the archive's hybrid
  ``session_search`` is ``hermes_core_session_search``;
* ``on_memory_write``: Hermes' built-in memory writes mirrored to the stack (``on_memory_write``);
* ``on_session_end`` / ``shutdown``: the same hooks, then the host's shutdown.

Every hook goes through the host's typed facade, so hermes-core's isolation and deadlines hold:
a failing hermes-core provider is logged and skipped, never raised into Hermes' turn.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from agent.memory_provider import MemoryProvider

from hermes_core.fence import provider_text
from hermes_core.types import EndReason, MemoryWrite, Message, Session, SwitchReason, ToolCall

from . import PROVIDER_NAME

__all__ = ["TOOL_PREFIX", "HermesCoreMemory"]

log = logging.getLogger("hermes_core.hermes_side")

TOOL_PREFIX = "hermes_core_"
#: set while this thread loads a hermes-core host for the provider: a stack that selects this
#: provider again (through the bridge) would load itself without end
_loading = threading.local()


class HermesCoreMemory(MemoryProvider):  # type: ignore[misc]
    """hermes-core's configured memory stack as Hermes' one external memory provider."""

    def __init__(self, home: str | Path | None = None) -> None:
        #: the hermes-core home; None: ``$HERMES_CORE_HOME`` or ``~/.hermes-core``
        self.home = Path(home).expanduser() if home is not None else None
        self._host: Any = None
        self._prefetch: Any = None
        self._router: Any = None
        self._session: Session | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    def is_available(self) -> bool:
        return True  # everything it needs is installed with it; the home is made on first use

    # ------------------------------------------------------------------ session

    def _session_for(self, session_id: str, kwargs: dict[str, Any],
                     parent: str | None = None) -> Session:
        attributes: dict[str, Any] = {"hermes_platform": kwargs.get("platform") or "cli"}
        user = kwargs.get("user_id")
        if isinstance(user, str) and user:
            from hermes_core.users import UserKeyError, check_user_key

            try:
                check_user_key(user)
            except UserKeyError:
                log.warning("Hermes user id %r is not a usable hermes-core user key; the turn "
                            "uses the shared memory", user)
            else:
                attributes["user_id"] = user
        return Session(id=session_id, platform=str(kwargs.get("platform") or "cli"),
                       parent_session_id=parent or kwargs.get("parent_session_id") or None,
                       attributes=attributes)

    def _load(self) -> Any:
        """The host, loaded once: Hermes asks for the tool schemas before ``initialize``."""
        from hermes_core.config import load_config
        from hermes_core.host import PluginHost
        from hermes_core.paths import home_dir
        from hermes_core.prefetch import PrefetchRunner
        from hermes_core.toolrun import ToolRouter

        with self._lock:
            if self._host is None:
                if getattr(_loading, "active", False):
                    raise RuntimeError(
                        "the hermes_core Hermes provider cannot run inside the hermes-core stack "
                        "it serves: remove hermes-hermes_core from memory.providers")
                home = self.home or home_dir()
                _loading.active = True
                try:
                    host = PluginHost.load(home, config=load_config(home))
                    host.activate_memory_providers()
                finally:
                    _loading.active = False
                tools = {f"{TOOL_PREFIX}{name}": entry for name, entry in host.tools().items()
                         if entry[0].curation is None}
                hooks = host.config.core.hooks
                self._router = ToolRouter(tools, timeout=hooks.tool_timeout,
                                          result_chars=hooks.tool_result_chars)
                self._prefetch = PrefetchRunner(host,
                                                timeout=host.config.core.memory.prefetch_timeout)
                self._host = host
            return self._host

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        host = self._load()
        self._session = self._session_for(session_id, kwargs)
        host.hooks.on_session_switch(new_session=self._session, old_session=None,
                                     reason=SwitchReason.RESUME)

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "",
                          reset: bool = False, rewound: bool = False, **kwargs: Any) -> None:
        if self._host is None or not new_session_id:
            return
        old = self._session
        reason = str(kwargs.get("reason") or "")
        if reason == "compression":
            why = SwitchReason.COMPRESSION
        elif reason == "branch":  # Hermes' /branch: a copy of the conversation, its parent kept
            why = SwitchReason.BRANCH
        elif reset:
            why = SwitchReason.NEW
        else:  # a resume; also Hermes' /undo (rewound=True): the kernel cannot take turns back
            why = SwitchReason.RESUME  # out of a session (docs/hermes.md)
        extra = {"platform": old.platform if old else "cli",
                 "user_id": old.attributes.get("user_id") if old else None}
        self._session = self._session_for(new_session_id, extra, parent=parent_session_id or None)
        if why is not SwitchReason.RESUME or rewound:  # /undo: no recall made for an undone turn
            self._prefetch.forget()
        self._host.hooks.on_session_switch(new_session=self._session, old_session=old,
                                           reason=why)

    # ------------------------------------------------------------------ context

    def _labelled(self, outcomes: list[Any], hook: str) -> str:
        parts = []
        for outcome in outcomes:
            if outcome.status != "ok" or not outcome.value:
                continue
            label = self._host.instance_name(outcome.plugin)
            text = provider_text(outcome.value, plugin=label, hook=hook)
            if text.strip():
                parts.append(f"## {label}\n{text.strip()}")
        return "\n\n".join(parts)

    def system_prompt_block(self) -> str:
        if self._host is None or self._session is None:
            return ""
        return self._labelled(self._host.hooks.system_prompt_block(session=self._session),
                              "system_prompt_block")

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        if self._host is None or self._session is None:
            return ""
        results = self._prefetch.run(query, self._session)
        return "\n\n".join(f"## {r.provider}\n{r.text.strip()}" for r in results if r.text.strip())

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        if self._host is not None and self._session is not None:
            self._host.hooks.queue_prefetch(query=query, session=self._session)

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: list[dict[str, Any]] | None = None) -> None:
        if self._host is None or self._session is None:
            return
        session = self._session
        if session_id and session_id != session.id:
            # Hermes syncs on its background worker, and switches (/resume, /branch) on its own
            # thread: a turn synced after a switch names the session it belongs to
            session = self._session_for(session_id, {
                "platform": session.platform, "user_id": session.attributes.get("user_id")})
        user = Message("user", user_content or "")
        assistant = Message("assistant", assistant_content or "")
        for message in (user, assistant):
            self._host.hooks.on_message(message=message, session=session)
        self._host.hooks.sync_turn(user_message=user, assistant_message=assistant,
                                   session=session, messages=[user, assistant])

    # ------------------------------------------------------------------ tools

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        self._load()
        return [{"name": f"{TOOL_PREFIX}{schema['name']}",  # the router's key for it
                 "description": schema.get("description", ""),
                 "parameters": schema.get("input_schema") or {"type": "object",
                                                              "properties": {}}}
                for schema in self._router.schemas()]

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        self._load()
        outcome = self._router.run_one(
            ToolCall(id=str(kwargs.get("tool_call_id") or tool_name), name=tool_name,
                     arguments=args if isinstance(args, dict) else {}), self._session)
        if outcome.is_error:
            return json.dumps({"error": outcome.content}, ensure_ascii=False)
        try:
            json.loads(outcome.content)
        except ValueError:
            return json.dumps({"result": outcome.content}, ensure_ascii=False)
        return str(outcome.content)

    # ------------------------------------------------------------------ the rest

    def on_memory_write(self, action: str, target: str, content: str,
                        metadata: dict[str, Any] | None = None) -> None:
        if self._host is None or action not in ("add", "replace", "remove"):
            return
        self._host.hooks.on_memory_write(write=MemoryWrite(
            action=action,  # type: ignore[arg-type]
            target=target, content=content or "", origin="hermes",
            session_id=self._session.id if self._session else None, provider="hermes"))

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        if self._host is None or self._session is None:
            return
        history = [Message(m["role"], m["content"]) for m in messages or []
                   if isinstance(m, dict) and m.get("role") in ("user", "assistant")
                   and isinstance(m.get("content"), str)]
        self._host.hooks.on_session_end(session=self._session, messages=history,
                                        reason=EndReason.NEW_SESSION)

    def shutdown(self) -> None:
        with self._lock:
            host, self._host = self._host, None
            if self._prefetch is not None:
                self._prefetch.close()
                self._prefetch = None
        if host is not None:
            host.shutdown()
