"""The Messages API request body: hermes messages converted to API messages, and prompt caching.

Pure functions of their arguments (no SDK import, no network): :class:`hermes_core.llm.AnthropicLLM`
builds each call's body with :func:`build_request`, and tests check the shape without a server.
``hermes_core.llm`` re-exports every public name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .types import Message

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "CacheTTL",
    "apply_cache_breakpoints",
    "build_request",
    "cache_marker",
    "to_anthropic_messages",
]

CacheTTL = Literal["5m", "1h"]
#: Anthropic accepts at most four cache_control breakpoints per request
MAX_CACHE_BREAKPOINTS = 4
#: block types that may not carry cache_control
_UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def to_anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert hermes messages to Messages-API ``messages``.

    Tool results become ``tool_result`` blocks in a user turn, assistant tool calls become
    ``tool_use`` blocks, and consecutive turns of one API role are merged (the API wants them
    alternating; a tool result followed by a user message is one user turn). Empty texts get a
    short placeholder because the API rejects empty text blocks. A ``system`` message here is an
    error: the system prompt is passed separately and must not change mid-session.
    """
    out: list[dict[str, Any]] = []
    for index, msg in enumerate(messages):
        convert = _TURN_BUILDERS.get(msg.role) if isinstance(msg.role, str) else None
        if convert is None:
            raise ValueError(f"message {index} has unknown role {msg.role!r}")
        role, blocks = convert(index, msg)
        _add_turn(out, role, blocks)
    return out


_Turn = tuple[str, list[dict[str, Any]]]


def _system_turn(index: int, msg: Message) -> _Turn:
    raise ValueError(
        f"message {index} has role 'system': pass the system prompt as 'system=' "
        "(it must stay byte-identical for the session), not inside the messages"
    )


def _tool_turn(index: int, msg: Message) -> _Turn:
    if not msg.tool_call_id:
        raise ValueError(
            f"message {index} is a tool result without tool_call_id; set it to the id of "
            "the tool call it answers"
        )
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": msg.tool_call_id,
        "content": msg.content or "(empty result)",
    }
    if msg.meta.get("is_error"):
        result["is_error"] = True
    return "user", [result]


def _assistant_turn(index: int, msg: Message) -> _Turn:
    blocks = [_text_block(msg.content)] if msg.content.strip() else []
    compaction = msg.meta.get("compaction")
    if isinstance(compaction, dict):
        # the server's compaction block goes back verbatim, ahead of the reply
        blocks.insert(0, {**compaction, "type": "compaction"})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in msg.tool_calls
    ]
    return "assistant", blocks or [_text_block("(no content)")]


def _user_turn(index: int, msg: Message) -> _Turn:
    return "user", [_text_block(msg.content if msg.content.strip() else "(empty message)")]


_TURN_BUILDERS = {
    "system": _system_turn,
    "tool": _tool_turn,
    "assistant": _assistant_turn,
    "user": _user_turn,
}


def _add_turn(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append a turn, merged into the last one when it has the same API role."""
    if not out or out[-1]["role"] != role:
        out.append({"role": role, "content": blocks})
        return
    prev = out[-1]["content"]
    # tool_result blocks must open a user turn: keep them ahead of any text
    if role == "user" and blocks[0]["type"] == "tool_result":
        text_blocks = [b for b in prev if b["type"] != "tool_result"]
        prev[:] = [b for b in prev if b["type"] == "tool_result"] + blocks + text_blocks
    else:
        prev.extend(blocks)


def cache_marker(ttl: CacheTTL = "5m") -> dict[str, str]:
    """The ``cache_control`` value for ``ttl`` ("5m" is the API default, so it is left implicit)."""
    if ttl not in ("5m", "1h"):
        raise ValueError(f"cache TTL must be '5m' or '1h', got {ttl!r}")
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def apply_cache_breakpoints(
    system: str | list[dict[str, Any]] | None,
    messages: Sequence[dict[str, Any]],
    ttl: CacheTTL = "5m",
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Place the ``system_and_3`` prompt-cache breakpoints; the inputs are not modified.

    One breakpoint on the system prompt (its last block), and one on the last block of each of the
    last three messages (fewer than four breakpoints when there is no system prompt is fine: the
    unused one is given to a fourth message, as the API allows four in all). Because the API caches
    the prefix up to each breakpoint, a stable system prompt plus these markers lets each call reuse
    everything but the newest turn.

    Returns ``(system_blocks, messages)`` ready for the request body.
    """
    marker = cache_marker(ttl)
    sys_blocks: list[dict[str, Any]] | None
    if isinstance(system, str):
        sys_blocks = [_text_block(system)] if system else None
    elif system:
        sys_blocks = [dict(block) for block in system]
    else:
        sys_blocks = None
    used = 0
    if sys_blocks:
        sys_blocks[-1]["cache_control"] = dict(marker)
        used = 1
    out = [dict(message) for message in messages]
    remaining = MAX_CACHE_BREAKPOINTS - used
    for message in reversed(out):
        if remaining == 0:
            break
        content = message.get("content")
        blocks = [_text_block(content)] if isinstance(content, str) else list(content or [])
        for pos in range(len(blocks) - 1, -1, -1):
            if blocks[pos].get("type") not in _UNCACHEABLE_BLOCKS:
                blocks[pos] = {**blocks[pos], "cache_control": dict(marker)}
                message["content"] = blocks
                remaining -= 1
                break
    return sys_blocks, out


def build_request(
    *,
    system: str,
    messages: Sequence[Message],
    model: str,
    max_tokens: int,
    tools: Sequence[dict[str, Any]] | None = None,
    cache_ttl: CacheTTL | None = "5m",
) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for one call.

    ``tools`` are provider-neutral schemas (``Tool.schema()``: name, description, input_schema).
    ``cache_ttl=None`` sends no cache breakpoints.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    api_messages = to_anthropic_messages(messages)
    if not api_messages:
        raise ValueError("a request needs at least one message")
    sys_param: Any
    if cache_ttl is None:
        sys_param = system or None
    else:
        sys_param, api_messages = apply_cache_breakpoints(system, api_messages, cache_ttl)
    request: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": api_messages}
    if sys_param:
        request["system"] = sys_param
    if tools:
        request["tools"] = [dict(tool) for tool in tools]
    return request
