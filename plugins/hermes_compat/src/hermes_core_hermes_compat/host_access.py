"""What a Hermes plugin's ``ctx`` reaches of the host: ``ctx.llm`` and ``ctx.dispatch_tool``.

``ctx.llm`` (Hermes Agent 0.19.0's ``agent.plugin_llm.PluginLlm``): chat and structured completions
on the user's model. Here they run on hermes-core's main model client (the kernel's
``PluginContext.llm("main")``), bounded by the plugin's ``timeout=`` or else Hermes' default of
30 s (at most ``llm.timeout``): the client's own bound, retries included. As a Hermes with no
``plugins.entries.<id>.llm`` trust block (hermes-core has no such setting), a ``provider=``,
``model=``, ``agent_id=`` or ``profile=`` of the plugin's own raises ``PluginLlmTrustError``.
Errors as 0.19.0's ``call_llm`` lets them out: the model SDK's own exception when the client's
failure came from one, else ``RuntimeError`` (``No LLM provider configured`` when there is no
model client).

``ctx.dispatch_tool(name, args)`` (0.19.0: the tool registry's ``dispatch`` with the parent agent):
runs the tool through the kernel's tool runner of the conversation whose tool call is running on
the plugin's thread (its router, session and turn), so the kernel's deadline, guards and result
limit apply; it answers the tool's text, or ``{"error": ...}`` JSON (0.19.0's registry never raises
either). Outside a tool call there is no conversation's tool runner to reach: an error JSON says so.

Of newer Hermes' ``ctx``: ``ctx.state`` (:class:`PluginState`, a plugin's durable JSON key/value
store in its Hermes home) and ``ctx.call_mcp`` (refused, as newer Hermes refuses
a server missing from the plugin's MCP allow-list, which hermes-core has no setting for: see
:class:`.loading._Collector`).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import importlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from hermes_core.atomic import atomic_write, locked
from hermes_core.errors import LLMError, LLMFailure
from hermes_core.kinds import PluginContext
from hermes_core.toolrun import ToolOutcome
from hermes_core.types import Message, ToolCall, ToolContext

from .calls import Pinned

__all__ = ["HostAccess", "PluginLlm", "PluginState", "dispatch_tool", "in_tool_call"]

T = TypeVar("T")

#: the hermes-core tool call running on this thread, and the plugin object's thread it runs on
_CALL: contextvars.ContextVar[tuple[ToolContext, Pinned] | None] = contextvars.ContextVar(
    "hermes_compat_tool_call", default=None)
_FENCE = re.compile(r"```(?:json)?\s*(.+?)```", re.DOTALL | re.IGNORECASE)
#: the bound of a call that names none: Hermes' default for a plugin's call (never more than
#: ``llm.timeout``)
HERMES_TIMEOUT = 30.0
_JSON_ONLY = ("Respond with a single JSON object that matches the requested shape. "
              "Do not include prose or markdown fences.")


class HostAccess:
    """The kernel's context of the bridged plugin's instance, for its ``ctx`` (``None`` where a
    plugin is loaded without one: listings). ``make`` builds it on first use instead (a
    command's process loads its host only when the plugin asks for the model); what it raises
    is an :class:`LLMError` of the call that asked."""

    def __init__(self, context: PluginContext | None = None, *,
                 make: Callable[[], PluginContext] | None = None) -> None:
        self._context = context
        self._make = make
        self._lock = threading.Lock()

    @property
    def context(self) -> PluginContext | None:
        with self._lock:
            if self._context is None and self._make is not None:
                make, self._make = self._make, None
                try:
                    self._context = make()
                except Exception as exc:
                    raise LLMError(f"hermes-core's host could not be loaded: {exc}",
                                   failure=LLMFailure.NOT_CONFIGURED) from exc
            return self._context


def in_tool_call(call: ToolContext, pinned: Pinned, fn: Callable[..., T], /, *args: Any,
                 **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` (on ``pinned``'s thread) with ``call`` as the tool call
    ``ctx.dispatch_tool`` runs in."""
    token = _CALL.set((call, pinned))
    try:
        return fn(*args, **kwargs)
    finally:
        _CALL.reset(token)


def dispatch_tool(tool_name: str, args: Any, **kwargs: Any) -> str:
    """Hermes' ``ctx.dispatch_tool``: the tool's answer, or ``{"error": ...}`` JSON."""
    running = _CALL.get()
    call, pinned = running if running is not None else (None, None)
    turn = getattr(call, "turn", None)
    router = getattr(getattr(turn, "agent", None), "router", None)
    if call is None or pinned is None or router is None:
        return json.dumps({"error": f"Tool {tool_name!r} cannot be dispatched here: hermes-core "
                                    "runs ctx.dispatch_tool only inside a tool call of a "
                                    "conversation (its tools are that conversation's)"})
    if tool_name not in router.tools:
        return json.dumps({"error": f"Unknown tool: {tool_name}"})
    request = ToolCall(id=f"plugin-{uuid.uuid4().hex[:12]}", name=str(tool_name),
                       arguments=dict(args or {}))
    done: Future[ToolOutcome] = Future()

    def run() -> None:
        try:
            done.set_result(router.run_one(request, call.session, turn=turn))
        except BaseException as exc:  # handed to the plugin's thread
            done.set_exception(exc)

    threading.Thread(target=run, name=f"hermes-dispatch-{tool_name}", daemon=True).start()
    # the plugin's thread serves what the call hands back to it (its guard hooks, its own tools)
    pinned.serve_until(done)
    outcome = done.result()
    if outcome.is_error:
        text = outcome.content
        return json.dumps({"error": text[len("Error: "):] if text.startswith("Error: ") else text})
    return str(outcome.content)


def _plugin_llm_module() -> Any:
    """``agent.plugin_llm``: hermes-agent's, or the bridge's stand-in."""
    return importlib.import_module("agent.plugin_llm")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        kind = part.get("type") if isinstance(part, dict) else getattr(part, "type", None)
        if kind in ("text", "input_text"):
            text = part.get("text") if isinstance(part, dict) else getattr(part, "text", "")
            parts.append(str(text or ""))
        elif kind is not None:
            raise ValueError(f"ctx.llm in hermes-core sends text only: a {kind!r} part "
                             "cannot be sent")
    return "\n".join(parts)


def to_kernel(messages: Sequence[dict[str, Any]]) -> tuple[str, list[Message]]:
    """OpenAI-style ``messages`` as the kernel's ``(system, messages)``."""
    system: list[str] = []
    out: list[Message] = []
    for item in messages:
        role = str(item.get("role", "user"))
        text = _text_of(item.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "assistant":
            out.append(Message(role="assistant", content=text))
        else:  # a tool result is read as text: the facade sends no tools
            out.append(Message(role="user", content=text))
    return "\n\n".join(s for s in system if s), out


def _sdk_error(exc: BaseException) -> BaseException | None:
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.split(".")[0] in ("openai", "anthropic"):
            return seen
        seen = seen.__cause__
    return None


class PluginLlm:
    """``ctx.llm`` of one Hermes plugin, on hermes-core's main model client."""

    def __init__(self, plugin_id: str, host: HostAccess) -> None:
        self._plugin_id = plugin_id
        self._host = host

    # ------------------------------------------------------------------ Hermes' surface

    def complete(self, messages: list[dict[str, Any]], *, provider: str | None = None,
                 model: str | None = None, temperature: float | None = None,
                 max_tokens: int | None = None, timeout: float | None = None,
                 agent_id: str | None = None, profile: str | None = None,
                 purpose: str | None = None) -> Any:
        self._refuse(provider, model, agent_id, profile)
        text, name, chosen, usage = self._call(list(messages), max_tokens, timeout)
        return _plugin_llm_module().PluginLlmCompleteResult(
            text=text, provider=name, model=chosen, agent_id="default", usage=usage,
            audit={"plugin_id": self._plugin_id, "purpose": purpose or "", "profile": ""})

    def complete_structured(self, *, instructions: str, input: Sequence[Any],
                            json_schema: Any | None = None, json_mode: bool = False,
                            schema_name: str | None = None, system_prompt: str | None = None,
                            provider: str | None = None, model: str | None = None,
                            temperature: float | None = None, max_tokens: int | None = None,
                            timeout: float | None = None, agent_id: str | None = None,
                            profile: str | None = None, purpose: str | None = None) -> Any:
        if not instructions or not instructions.strip():
            raise ValueError("complete_structured requires non-empty instructions")
        if not input:
            raise ValueError("complete_structured requires at least one input block")
        self._refuse(provider, model, agent_id, profile)
        wants_json = json_mode or json_schema is not None
        system = "\n\n".join(p for p in ((system_prompt or "").strip(),
                                          _JSON_ONLY if wants_json else "") if p)
        header = instructions.strip()
        if schema_name:
            header += f"\n\nSchema name: {schema_name}"
        if json_schema is not None:
            header += "\n\nJSON schema:\n" + json.dumps(json_schema, ensure_ascii=False,
                                                        sort_keys=True, default=str)
        parts = [{"type": "text", "text": header}, *(_block(b) for b in input)]
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": parts}]
        text, name, chosen, usage = self._call(messages, max_tokens, timeout)
        parsed, kind = _parsed(text, wants_json, json_schema)
        return _plugin_llm_module().PluginLlmStructuredResult(
            text=text, provider=name, model=chosen, agent_id="default", usage=usage,
            parsed=parsed, content_type=kind,
            audit={"plugin_id": self._plugin_id, "purpose": purpose or "", "profile": "",
                   "schema_name": schema_name or ""})

    async def acomplete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.complete, messages, **kwargs)

    async def acomplete_structured(self, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.complete_structured, **kwargs)

    # ------------------------------------------------------------------ internals

    def _refuse(self, provider: str | None, model: str | None, agent_id: str | None,
                profile: str | None) -> None:
        """As Hermes without a ``plugins.entries.<id>.llm`` trust block: no override."""
        for asked, what in ((provider, "the provider"), (model, "the model"),
                            (agent_id, "the agent id"), (profile, "the auth profile")):
            if asked:
                raise _plugin_llm_module().PluginLlmTrustError(
                    f"Plugin {self._plugin_id!r} cannot override {what}: hermes-core runs "
                    "ctx.llm on its own model (llm.client, llm.model) and grants no plugin "
                    "an override")

    def _call(self, messages: list[dict[str, Any]], max_tokens: int | None,
              timeout: float | None) -> tuple[str, str, str, Any]:
        system, history = to_kernel(messages)
        try:
            context = self._host.context
            if context is None:
                raise LLMError("no hermes-core host", failure=LLMFailure.NOT_CONFIGURED)
            client = context.llm("main")
            llm = context.config.llm
            bound = float(timeout) if timeout is not None else min(HERMES_TIMEOUT, llm.timeout)
            response = client.respond(system=system, messages=history,
                                      max_tokens=int(max_tokens or llm.max_tokens), timeout=bound)
        except LLMError as exc:
            sdk = None if exc.failure is LLMFailure.NOT_CONFIGURED else _sdk_error(exc)
            if sdk is not None:  # what Hermes' call_llm lets out; its chain already holds it
                raise sdk from None
            raise _hermes_error(exc) from exc
        usage = response.usage
        shapes = _plugin_llm_module()
        counted = shapes.PluginLlmUsage(
            input_tokens=usage.prompt_tokens, output_tokens=usage.output_tokens,
            total_tokens=usage.prompt_tokens + usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens)
        chosen = response.model or usage.model or getattr(client, "model", "") or "default"
        return response.text, context.config.llm.client, chosen, counted


def _hermes_error(exc: LLMError) -> RuntimeError:
    """The ``RuntimeError`` Hermes 0.19.0's ``call_llm`` raises where no SDK error came out."""
    if exc.failure is LLMFailure.NOT_CONFIGURED:
        return RuntimeError(f"No LLM provider configured for task=None provider=auto: {exc}")
    return RuntimeError(f"{exc} (failure: {exc.failure.value})")


def _block(block: Any) -> dict[str, Any]:
    """An input block of ``complete_structured`` (a dict, or a ``PluginLlm*Input``) as a part."""
    is_dict = isinstance(block, dict)
    kind = block.get("type") if is_dict else getattr(block, "type", None)
    if kind == "image":
        return {"type": "image"}
    if kind == "text":
        text = block.get("text") if is_dict else str(getattr(block, "text", ""))
        if not isinstance(text, str):
            raise ValueError("text input block requires 'text' string")
        return {"type": "text", "text": text}
    raise ValueError(f"Unknown input block type: {kind!r}" if is_dict
                     else f"Unsupported input block: {type(block).__name__}")


def _parsed(text: str, wants_json: bool, schema: Any | None) -> tuple[Any | None, str]:
    if not wants_json or not text:
        return None, "text"
    found = _FENCE.search(text)
    try:
        parsed = json.loads(found.group(1).strip() if found else text.strip())
    except ValueError:
        return None, "text"
    if schema is not None:
        try:
            import jsonschema
        except ImportError:  # as Hermes: without jsonschema the schema is not enforced
            return parsed, "json"
        try:
            jsonschema.validate(parsed, schema)
        except jsonschema.ValidationError as exc:
            raise ValueError(f"Plugin LLM structured output did not match schema: "
                             f"{exc.message}") from exc
    return parsed, "json"


#: newer Hermes' limits of ``ctx.state``
_STATE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_STATE_QUOTA = 10 * 1024 * 1024


class PluginState:
    """Newer Hermes' ``ctx.state``: JSON values by key in ``state.json`` of the plugin's own
    folder under ``plugin-data/`` of its Hermes home (the one its call runs with: under
    ``memory.scope: user``, the user's). Writes are locked and atomic; the file stays within
    10 MiB."""

    def __init__(self, plugin_id: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_-]+", "-", plugin_id).strip("-")[:64] or "plugin"
        digest = hashlib.sha256(plugin_id.encode("utf-8")).hexdigest()[:8]
        self._namespace = f"plugin-{safe}-{digest}"

    @property
    def data_dir(self) -> Path:
        home = importlib.import_module("hermes_constants").get_hermes_home()
        return Path(home) / "plugin-data" / self._namespace

    @property
    def path(self) -> Path:
        return self.data_dir / "state.json"

    @property
    def quota_bytes(self) -> int:
        return _STATE_QUOTA

    @staticmethod
    def _check(key: Any) -> None:
        if not isinstance(key, str) or not _STATE_KEY.fullmatch(key) or ".." in key:
            raise ValueError("Plugin state keys must be 1-128 characters using letters, numbers, "
                             "'_', '-', '.', or ':' (without '..')")

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"Cannot parse plugin state {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise RuntimeError(f"Cannot parse plugin state {path}: root must be an object")
        return data

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return self._read(self.path).get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._check(key)
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        with locked(path):
            data = self._read(path)
            data[key] = value
            try:
                encoded = json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Plugin state value for {key!r} is not JSON-serializable") \
                    from exc
            if len(encoded) > _STATE_QUOTA:
                raise ValueError(f"Plugin state quota exceeded: {len(encoded)} bytes is greater "
                                 f"than the {_STATE_QUOTA}-byte per-plugin quota")
            atomic_write(path, encoded)

