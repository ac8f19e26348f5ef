"""Asking the stack what it would give the model for a question, as ranked items.

Three kinds of *source*, each giving a ranked list of :class:`Item`:

* ``prompt:<provider>`` — a provider's ``system_prompt_block`` for a fresh session (e.g. the file
  memory's MEMORY.md/USER.md snapshot): what the model sees before any turn;
* ``prefetch:<provider>`` — the provider's ``prefetch`` for the question, run by the agent's
  :class:`~hermes_core.prefetch.PrefetchRunner` under the eval's deadline;
* ``tool:<name>`` — a search tool a provider offers, called as the model would call it with
  ``{"query": <question>}``. By default every tool of an active memory provider whose arguments
  are a ``query`` string and nothing else required, and whose input model accepts a query alone
  (``session_search``, ``hindsight_recall``, ``honcho_search``, ...); ``tools=`` names them
  instead.

Text becomes items line by line: one non-empty line of a prompt block or prefetch text is one
item. A tool result that is JSON with a list (``results``, ``memories``, ...) gives one item per
element, whose text is every string inside it and whose session id is its ``session_id`` (or
``session``) field; a plain-text result gives one item per line.

The question runs in its own new session (so a search that leaves out the current session leaves
out nothing of the haystack), with :mod:`hermes_core.clock` pinned to the question's date.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_core.errors import ToolError
from hermes_core.fence import provider_label, provider_text
from hermes_core.prefetch import PrefetchRunner
from hermes_core.types import Session, ToolContext

if TYPE_CHECKING:
    from hermes_core.host import PluginHost
    from hermes_core.kinds import Tool

__all__ = ["Item", "Retrieval", "SourceResult", "retrieve", "search_tools"]

_LIST_KEYS = ("results", "memories", "hits", "items", "conclusions", "messages", "sessions", "facts")
_SESSION_KEYS = ("session_id", "session")


@dataclass(slots=True)
class Item:
    text: str
    session_id: str | None = None


@dataclass
class SourceResult:
    source: str
    items: list[Item] = field(default_factory=list)
    #: the text as the model would read it (for token counts and answering)
    text: str = ""
    seconds: float | None = None
    status: str = "ok"  #: ok | empty | error | timeout | stale
    error: str | None = None

    @property
    def failed(self) -> bool:
        """A provider that raised or hung (a tool's own clean ToolError is not a failure)."""
        return self.status in ("timeout", "stale") or (self.status == "error" and not
                                                      (self.error or "").startswith("ToolError"))


@dataclass
class Retrieval:
    sources: list[SourceResult]
    seconds: float


def search_tools(host: PluginHost) -> dict[str, tuple[Tool, str]]:
    """The tools of active memory providers callable with ``{"query": text}`` alone."""
    out = {}
    for name, (tool, plugin) in host.tools().items():
        if not plugin.startswith("memory-provider:"):
            continue
        schema = tool.input_schema()
        props = schema.get("properties") or {}
        query = props.get("query")
        required = set(schema.get("required") or [])
        if not (isinstance(query, dict) and query.get("type", "string") == "string"
                and required <= {"query"}):
            continue
        if tool.input_model is not None:
            try:  # a model may still refuse a query alone (e.g. it wants one of several modes)
                tool.input_model.model_validate({"query": "what did I say about the weather"})
            except ValueError:
                continue
        out[name] = (tool, plugin)
    return out


def _prompt_blocks(host: PluginHost, session: Session) -> list[tuple[str, Any, BaseException | None]]:
    return [(o.plugin, o.value, o.error) for o in host.hooks.system_prompt_block(session=session)]


def _lines(text: str) -> list[Item]:
    return [Item(line.strip()) for line in text.splitlines() if line.strip()]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _element(value: Any) -> Item:
    sid = None
    if isinstance(value, dict):
        for key in _SESSION_KEYS:
            if isinstance(value.get(key), str):
                sid = value[key]
                break
    return Item("\n".join(_strings(value)), sid)


def items_from_result(result: Any) -> list[Item]:
    """A tool result as ranked items (see the module docstring)."""
    if isinstance(result, str):
        try:
            parsed = json.loads(result)
        except ValueError:
            return _lines(result)
        if isinstance(parsed, dict | list):
            result = parsed
        else:
            return _lines(result)
    if isinstance(result, list):
        return [_element(v) for v in result]
    if isinstance(result, dict):
        for key in _LIST_KEYS:
            if isinstance(result.get(key), list):
                return [_element(v) for v in result[key]]
        for value in result.values():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                return [_element(v) for v in value]
        text = "\n".join(_strings(result))
        return _lines(text)
    return []


def _call_tool(tool: Tool, plugin: str, query: str, session: Session, deadline: float) -> SourceResult:
    out = SourceResult(f"tool:{tool.name}")
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            args: Any = {"query": query}
            if tool.input_model is not None:
                args = tool.input_model.model_validate(args)
            box["value"] = tool.handler(args, ToolContext(session=session, plugin_name=plugin))
        except BaseException as exc:
            box["error"] = exc

    started = time.perf_counter()
    thread = threading.Thread(target=run, name=f"eval-tool-{tool.name}", daemon=True)
    thread.start()
    thread.join(deadline)
    if thread.is_alive():
        out.status, out.error = "timeout", f"no answer within {deadline:g} s"
        return out
    out.seconds = time.perf_counter() - started
    if "error" in box:
        exc = box["error"]
        out.status = "error"
        out.error = f"{'ToolError' if isinstance(exc, ToolError) else type(exc).__name__}: {exc}"
        return out
    value = box.get("value")
    out.text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    out.items = items_from_result(value)
    out.status = "ok" if out.items else "empty"
    return out


def retrieve(host: PluginHost, runner: PrefetchRunner, question: str, *, session_id: str,
             attributes: dict[str, Any] | None = None, deadline: float = 30.0,
             tools: list[str] | None = None) -> Retrieval:
    """Every source's ranked items for ``question`` (call with the clock pinned to its date)."""
    started = time.perf_counter()
    session = Session(id=session_id, platform="eval", attributes=dict(attributes or {}))
    sources: list[SourceResult] = []
    for plugin, value, error in _prompt_blocks(host, session):
        if not plugin.startswith("memory-provider:"):
            continue
        res = SourceResult(f"prompt:{provider_label(plugin)}")
        if error is not None:
            res.status, res.error = "error", f"{type(error).__name__}: {error}"
        else:
            res.text = provider_text(value, plugin=plugin, hook="system_prompt_block") or ""
            res.items = _lines(res.text)
            res.status = "ok" if res.items else "empty"
        sources.append(res)
    for r in runner.run(question, session):
        res = SourceResult(f"prefetch:{r.provider}", seconds=r.seconds)
        if r.status == "error":
            res.status, res.error = "error", r.error
        elif r.status == "stale":
            res.status, res.error = "stale", f"no answer within {runner.timeout:g} s"
        else:
            res.text = r.text
            res.items = _lines(r.text)
            res.status = "ok" if res.items else "empty"
        sources.append(res)
    available = search_tools(host) if tools is None else {
        name: entry for name, entry in host.tools().items() if name in tools}
    if tools is not None:
        for name in tools:
            if name not in available:
                sources.append(SourceResult(f"tool:{name}", status="error",
                                            error=f"ToolError: no active plugin offers {name!r}"))
    for name in sorted(available):
        tool, plugin = available[name]
        sources.append(_call_tool(tool, plugin, question, session, deadline))
    return Retrieval(sources, time.perf_counter() - started)
