"""Converting between the kernel's shapes and OpenAI's Chat Completions, both ways.

Requests: :class:`~hermes_core.types.Message` history to ``messages`` (the system prompt first,
assistant tool calls as ``tool_calls`` with JSON-text arguments, tool results as ``role: tool``
messages), the kernel's tool definitions (``name``, ``description``, ``input_schema``) to
``tools`` of type ``function``.

Responses: a ``ChatCompletion`` (or the chunks of a streamed one, assembled by
:class:`StreamAssembler`) to :class:`~hermes_core.llm.LLMResponse`: text, tool calls (parallel
ones in the model's order), usage, and the finish reason mapped to the kernel's stop reasons.

Arguments that are not a JSON object (broken JSON from a small model, or cut off at
``max_tokens``) do not fail the turn: the call comes back with ``ToolCall.error`` set, so the
kernel does not run the tool and the model reads an error result saying what was wrong, and can
call again. Nothing here imports the openai SDK: it reads the SDK's objects by attribute.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes_core.llm import LLMResponse
from hermes_core.types import Message, ToolCall, Usage

__all__ = [
    "FINISH_REASONS",
    "StreamAssembler",
    "from_completion",
    "read_arguments",
    "stop_reason",
    "to_chat_messages",
    "to_chat_tools",
    "usage_of",
]

log = logging.getLogger("hermes_core.plugins.llm.openai")

#: Chat Completions' finish reasons and the kernel's stop reasons they mean
FINISH_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",  # the deprecated single-function form
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_chat_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The ``messages`` of a request: ``system`` first, then the history converted."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for index, msg in enumerate(messages):
        if msg.role == "system":
            raise ValueError(
                f"message {index} has role 'system': pass the system prompt as 'system=' "
                "(it must stay byte-identical for the session), not inside the messages")
        if msg.role == "tool":
            if not msg.tool_call_id:
                raise ValueError(f"message {index} is a tool result without tool_call_id; set it "
                                 "to the id of the tool call it answers")
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id,
                        "content": msg.content or "(empty result)"})
        elif msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": msg.content or None}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.name,
                                  "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
                    for call in msg.tool_calls]
            elif entry["content"] is None:
                entry["content"] = "(no content)"
            out.append(entry)
        elif msg.role == "user":
            out.append({"role": "user", "content": msg.content or "(empty message)"})
        else:
            raise ValueError(f"message {index} has unknown role {msg.role!r}")
    return out


def to_chat_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kernel's tool definitions as Chat Completions ``function`` tools."""
    return [{"type": "function",
             "function": {"name": tool["name"], "description": tool.get("description", ""),
                          "parameters": tool.get("input_schema")
                          or {"type": "object", "properties": {}}}}
            for tool in tools]


def read_arguments(name: str, raw: str | None,
                   finish_reason: str | None) -> tuple[dict[str, Any], str | None]:
    """``(arguments, error)`` of one call's JSON text; ``error`` is what the model will read."""
    text = (raw or "").strip()
    if not text:
        return {}, None  # a call without parameters: some servers send ""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = " (the answer was cut off at max_tokens)" if finish_reason == "length" else ""
        shown = text if len(text) <= 200 else text[:200] + "..."
        return {}, (f"the arguments of this call to {name!r} are not valid JSON{cut}: {exc.msg} "
                    f"at character {exc.pos} of {shown!r}. The tool was not run; call it again "
                    "with the arguments as one JSON object.")
    if not isinstance(value, dict):
        return {}, (f"the arguments of this call to {name!r} are a JSON {type(value).__name__}, "
                    "not an object. The tool was not run; call it again with the arguments as "
                    "one JSON object.")
    return value, None


def stop_reason(finish_reason: str | None, *, model: str | None) -> str | None:
    """The kernel's stop reason; an unknown finish reason is kept as is, with a warning."""
    if finish_reason is None:
        return None
    mapped = FINISH_REASONS.get(finish_reason)
    if mapped is None:
        log.warning("the openai client: model %s finished with finish_reason %r, which is not one "
                    "of %s; its answer is used as it is (text and tool calls)", model,
                    finish_reason, ", ".join(FINISH_REASONS))
        return finish_reason
    return mapped


def usage_of(raw: Any, model: str | None) -> Usage:
    """``usage`` of a response (prompt tokens include the cached ones; the kernel's
    ``input_tokens`` are the uncached part, ``cache_read_tokens`` the cached)."""
    if raw is None:
        return Usage(model=model)
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(input_tokens=max(0, prompt - cached),
                 output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
                 cache_read_tokens=cached, model=model)


def _calls(raw: Sequence[tuple[str, str, str]], finish_reason: str | None) -> list[ToolCall]:
    calls = []
    for call_id, name, arguments in raw:
        args, error = read_arguments(name, arguments, finish_reason)
        calls.append(ToolCall(id=call_id, name=name, arguments=args, error=error))
    return calls


def from_completion(completion: Any) -> LLMResponse:
    """An ``LLMResponse`` from a (non-streamed) ``ChatCompletion``."""
    model = getattr(completion, "model", None)
    choices = getattr(completion, "choices", None) or []
    usage = usage_of(getattr(completion, "usage", None), model)
    if not choices:
        return LLMResponse(text="", usage=usage, stop_reason=None, model=model)
    choice = choices[0]
    message = choice.message
    finish = getattr(choice, "finish_reason", None)
    raw = [(c.id, c.function.name, c.function.arguments) for c in (message.tool_calls or ())
           if getattr(c, "function", None) is not None]
    return LLMResponse(text=message.content or "", tool_calls=_calls(raw, finish), usage=usage,
                       stop_reason=stop_reason(finish, model=model), model=model)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Folds ``chat.completion.chunk`` objects into one response.

    Tool-call deltas are joined by their ``index`` (a call's id and name come once, its
    arguments in pieces, and pieces of parallel calls may interleave).
    """

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str | None = None
    usage: Any = None

    def feed(self, chunk: Any) -> str:
        """Take one chunk; return its text delta ("" when it has none)."""
        self.model = getattr(chunk, "model", None) or self.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        delta_text = ""
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    delta_text += delta.content
                for part in delta.tool_calls or ():
                    call = self.calls.setdefault(part.index, _PartialCall())
                    call.id = part.id or call.id
                    function = part.function
                    if function is not None:
                        call.name = function.name or call.name
                        if function.arguments:
                            call.arguments.append(function.arguments)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        if delta_text:
            self.text.append(delta_text)
        return delta_text

    def response(self) -> LLMResponse:
        raw = [(c.id or f"call_{i}", c.name, "".join(c.arguments))
               for i, c in sorted(self.calls.items())]
        return LLMResponse(text="".join(self.text), tool_calls=_calls(raw, self.finish_reason),
                           usage=usage_of(self.usage, self.model),
                           stop_reason=stop_reason(self.finish_reason, model=self.model),
                           model=self.model)
