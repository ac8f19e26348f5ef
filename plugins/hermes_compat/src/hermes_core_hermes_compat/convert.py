"""Translations between hermes-core's types and the shapes Hermes plugins speak.

Messages become OpenAI-style dicts (``role``, ``content``, ``tool_calls``, ``tool_call_id``);
tool schemas in either OpenAI shape (bare, or wrapped in ``{"type": "function", "function":
...}``) become hermes-core :class:`~hermes_core.kinds.Tool` descriptions; calls are made with
only the keyword arguments a plugin's method accepts.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from hermes_core.errors import ToolError
from hermes_core.kinds import TOOL_NAME_RE, Tool
from hermes_core.types import MemoryWrite, Message, Session, ToolCall, ToolContext

__all__ = ["accepts", "author_keywords", "call_with", "from_openai", "hermes_tools", "names",
           "to_openai", "tool_result", "tool_spec", "turn_author", "write_metadata"]


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                for c in m.tool_calls]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id or ""
            if m.tool_name:
                item["name"] = m.tool_name
        out.append(item)
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def from_openai(items: Sequence[Any]) -> list[Message]:
    """OpenAI-style dicts back to messages; a ``system`` message (an engine's summary note) is
    carried as a user message, since the kernel keeps the system prompt itself."""
    out: list[Message] = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"a message must be a dict, got {type(item).__name__}")
        role = item.get("role")
        content = _text(item.get("content"))
        if role == "system":
            out.append(Message("user", content, meta={"hermes_role": "system"}))
        elif role == "tool":
            out.append(Message("tool", content, tool_call_id=item.get("tool_call_id"),
                               tool_name=item.get("name")))
        elif role in ("user", "assistant"):
            calls = []
            for raw in item.get("tool_calls") or ():
                fn = raw.get("function", raw) if isinstance(raw, dict) else {}
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args or "{}")
                    except ValueError:
                        args = {"raw": args}
                calls.append(ToolCall(id=str(raw.get("id", "")), name=str(fn.get("name", "")),
                                      arguments=args if isinstance(args, dict) else {"value": args}))
            out.append(Message(role, content, tool_calls=calls))
        else:
            raise ValueError(f"unknown message role {role!r}")
    return out


def tool_spec(schema: Any) -> tuple[str, str, dict[str, Any]]:
    """(name, description, parameters) of a tool schema in either OpenAI shape.

    Raises ``ValueError`` naming what hermes-core cannot express.
    """
    if not isinstance(schema, dict):
        raise ValueError(f"a tool schema must be a dict, got {type(schema).__name__}")
    body = schema.get("function") if schema.get("type") == "function" else schema
    if not isinstance(body, dict):
        raise ValueError("a {'type': 'function'} schema needs a 'function' object")
    name = body.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise ValueError(f"tool name {name!r} is not 1-64 letters, digits, '_' or '-'")
    params = body.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ValueError(f"tool {name!r}: its parameters are not a JSON schema object "
                         "(\"type\": \"object\"), which tool calls need")
    return name, str(body.get("description") or ""), params


@functools.lru_cache(maxsize=1024)
def _parameters(fn: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return frozenset(), True
    names = frozenset(sig.parameters)
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    return names, open_kw


def accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (by name, or through ``**kwargs``)."""
    try:
        names, open_kw = _parameters(getattr(fn, "__func__", fn))
    except TypeError:  # an unhashable callable
        return True
    return open_kw or name in names


def names(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` names a parameter ``name`` itself (``**kwargs`` does not count: a keyword
    newer Hermes added reaches only a method written for it, never a 0.19.0 one)."""
    try:
        return name in _parameters(getattr(fn, "__func__", fn))[0]
    except TypeError:  # an unhashable callable
        return False


def turn_author(session: Session) -> dict[str, Any] | None:
    """Newer Hermes' ``turn_author`` (``{"id", "name", "is_bot"}``) of a turn in ``session``:
    its user key, when it has one (the dispatcher then refuses any other sender, so every turn
    of it is that user's), with the platform's ``user_name``; None otherwise."""
    if not session.user_id:
        return None
    name = session.attributes.get("user_name")
    return {"id": session.user_id, "name": name if isinstance(name, str) and name else None,
            "is_bot": False}


def author_keywords(fn: Callable[..., Any], session: Session) -> dict[str, Any]:
    """The author keywords newer Hermes passes ``on_turn_start``, those ``fn`` names."""
    author = turn_author(session) or {}
    offered = {"author_id": author.get("id"), "author_name": author.get("name"),
               "author_is_bot": bool(author.get("is_bot"))}
    return {k: v for k, v in offered.items() if names(fn, k)}


def call_with(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with ``args`` and only those ``kwargs`` its signature accepts."""
    return fn(*args, **{k: v for k, v in kwargs.items() if accepts(fn, k)})


def hermes_tools(obj: Any, owner: str, problem: Callable[[str], None],
                 call: Callable[[str, dict[str, Any], ToolContext], Any], *,
                 check: bool = True) -> list[Tool]:
    """hermes-core tools for ``obj.get_tool_schemas()``; each call goes through ``call`` and its
    result is checked by :func:`tool_result` (unless ``check`` is false: ``call`` did it).
    Schemas hermes-core cannot express are skipped and reported through ``problem``."""
    try:
        schemas = obj.get_tool_schemas() or []
    except Exception as exc:
        problem(f"get_tool_schemas() raised {type(exc).__name__}: {exc}; no tools offered")
        return []
    if not isinstance(schemas, list):
        problem(f"get_tool_schemas() returned {type(schemas).__name__}, not a list: no tools offered")
        return []
    tools: list[Tool] = []
    for schema in schemas:
        try:
            name, description, params = tool_spec(schema)
        except ValueError as exc:
            problem(f"a tool schema cannot be expressed in hermes-core, skipped: {exc}")
            continue

        def handle(args: Any, ctx: ToolContext, _name: str = name) -> str:
            value = call(_name, dict(args or {}), ctx)
            return tool_result(owner, _name, value, problem) if check else str(value)
        tools.append(Tool(name=name, description=description or f"{owner} tool",
                          parameters=params, handler=handle))
    return tools


def tool_result(owner: str, tool: str, result: Any, problem: Callable[[str], None]) -> str:
    """A Hermes tool result as text: JSON text passes; other text passes with a reported
    problem; JSON-able data is converted; anything else is a clear tool error."""
    if isinstance(result, str):
        try:
            json.loads(result)
        except ValueError:
            problem(f"handle_tool_call({tool!r}) returned text that is not JSON; passed to the "
                    "model as plain text")
        return result
    try:
        text = json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ToolError(f"{owner}: handle_tool_call({tool!r}) returned a "
                        f"{type(result).__name__}, neither JSON text nor JSON data") from None
    problem(f"handle_tool_call({tool!r}) returned {type(result).__name__}, not JSON text; converted")
    return text


#: hermes-core's write origins as Hermes names them (``write_origin``, ``execution_context``)
_ORIGINS: dict[str, tuple[str, str]] = {
    "assistant_tool": ("assistant_tool", "foreground"),
    "memory_review": ("background_review", "background_review"),
    # the pre-compaction flush: Hermes' documented context name for it
    "memory_flush": ("memory_flush", "flush"),
}


def write_metadata(write: MemoryWrite, session: Session | None = None) -> dict[str, Any]:
    """The ``metadata`` Hermes passes to ``on_memory_write`` (its keys ``write_origin``,
    ``execution_context``, ``session_id``, ``parent_session_id``, ``platform``, ``tool_name``;
    ``session``: the one that wrote, when known), plus what hermes-core knows more."""
    origin, context = _ORIGINS.get(write.origin, (write.origin, "foreground"))
    metadata: dict[str, Any] = {
        "write_origin": origin, "execution_context": context,
        "session_id": write.session_id or "",
        "parent_session_id": session.parent_session_id if session is not None else None,
        "platform": session.platform if session is not None else None, "tool_name": "memory",
        "provider": write.provider or "", "old_text": write.old_text}
    return {k: v for k, v in metadata.items() if v not in (None, "")}
