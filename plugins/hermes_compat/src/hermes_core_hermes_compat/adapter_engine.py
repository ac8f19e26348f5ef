"""A Hermes context engine as a hermes-core context engine (``hermes-<name>``).

Mapping: ``should_compress(messages, prompt_tokens, session)`` ->
``should_compress(prompt_tokens)``; ``compress(messages, focus_topic, memory_context, session)``
-> ``compress(openai_messages, current_tokens=, focus_topic=, memory_context=)`` (optional
arguments only when the engine's signature takes them), its result turned back into messages;
``update_from_response(usage)`` -> ``update_from_response({prompt_tokens, completion_tokens,
total_tokens, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens})``; the first
call of a session -> ``on_session_start(session_id, hermes_home=, platform=)``; tools as for
providers. Engines built on Hermes' ``ContextCompressor`` need hermes-agent itself.
"""

from __future__ import annotations

import bisect
import collections
import copy
import json
import threading
from pathlib import Path
from typing import Any

from hermes_core import hookimpl
from hermes_core.errors import PluginError
from hermes_core.kinds import ContextEngine, PluginContext, Tool
from hermes_core.results import estimate_tokens
from hermes_core.types import CompressionResult, EndReason, Message, Session, ToolContext, Usage

from . import calls
from .adapter_objects import Bridged, bridged_class
from .convert import call_with, from_openai, hermes_tools, to_openai
from .discovery import HermesCandidate
from .loading import unload
from .settings import HermesSection

__all__ = ["HermesContextEngine", "engine_class"]


class HermesContextEngine(Bridged, ContextEngine):
    """Runs one Hermes context engine; :func:`engine_class` sets ``candidate``."""

    Config = HermesSection

    def __init__(self, config: HermesSection, context: PluginContext) -> None:
        super().__init__(config, context)
        loaded = self._load_plugin()
        if not loaded.engines:
            raise PluginError(f"Hermes plugin {self.candidate.plugin!r} registered no context "
                              "engine (it is a memory provider: list it in memory.providers)")
        self.engine = loaded.engines[0]
        self._loaded = loaded
        self.hermes_home: Path = calls.hermes_home_for(context.home, self.candidate.plugin, None)
        self._session: str | None = None
        #: the sessions whose end the engine was given (each once)
        self._ended: set[str] = set()
        self._problems: set[str] = set()
        self._lock = threading.Lock()
        from hermes_core.models import context_window

        if hasattr(self.engine, "update_model"):  # Hermes tells its engine the model's window
            with calls.in_home(self.hermes_home):
                call_with(self.engine.update_model, context.config.llm.model,
                          context_window(context.config))

    def _start(self, session: Session | None) -> None:
        if session is None or self._session == session.id:
            return
        with self._lock:
            if self._session == session.id:
                return
            self.hermes_home.mkdir(parents=True, exist_ok=True)
            calls.point_env(self.context.home)
            start = getattr(self.engine, "on_session_start", None)
            if callable(start):
                with calls.in_home(self.hermes_home):
                    call_with(start, session.id, hermes_home=str(self.hermes_home),
                              platform=session.platform, model=session.model or "")
            self._session = session.id

    @hookimpl
    def should_compress(self, messages: list[Message], prompt_tokens: int | None,
                        session: Session | None) -> bool | None:
        self._start(session)
        # Hermes asks with the size of the request about to be sent; the kernel's figure is the
        # last response's (None before the first, after a compaction, or from a model client
        # that reports no usage): the history's own estimate when it is larger
        tokens = max(prompt_tokens or 0, estimate_tokens(messages))
        with calls.in_home(self.hermes_home):
            return bool(self.engine.should_compress(tokens))

    @hookimpl
    def compress(self, messages: list[Message], focus_topic: str | None, memory_context: str,
                 session: Session | None) -> CompressionResult | None:
        self._start(session)
        sent = to_openai(messages)
        with calls.in_home(self.hermes_home):  # a copy, as Hermes gives: it may be changed
            out = call_with(self.engine.compress, copy.deepcopy(sent), focus_topic=focus_topic,
                            memory_context=memory_context or "", force=focus_topic is not None)
        if not isinstance(out, list):
            raise PluginError(f"Hermes engine {self.candidate.plugin!r}: compress() returned "
                              f"{type(out).__name__}, not a list of messages")
        if out != sent and session is not None:
            # as Hermes before it moves the conversation on: the old session's end (an engine
            # keeping a store takes in what it has not yet)
            self._end(session.id, sent)
        return CompressionResult(messages=_kept(messages, sent, out),
                                 report={"hermes_engine": self.candidate.plugin})

    @hookimpl
    def on_session_end(self, session: Session, messages: list[Message], reason: EndReason
                       ) -> None:
        """``on_session_end(session_id, messages)`` at the session's end (``/new``, exit, a
        conversation evicted), once; ``on_session_reset()`` after it at ``/new``, as Hermes
        resets its engine there."""
        self._end(session.id, to_openai(messages))
        reset = getattr(self.engine, "on_session_reset", None)
        if reason == EndReason.NEW_SESSION and callable(reset):
            with self._lock, calls.in_home(self.hermes_home):
                reset()

    def _end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        end = getattr(self.engine, "on_session_end", None)
        with self._lock:
            if session_id in self._ended or not callable(end):
                return
            self._ended.add(session_id)
            with calls.in_home(self.hermes_home):
                end(session_id, messages)

    @hookimpl
    def update_from_response(self, usage: Usage) -> None:
        data = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.output_tokens,
                "total_tokens": usage.prompt_tokens + usage.output_tokens,
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens, "reasoning_tokens": 0}
        with calls.in_home(self.hermes_home):
            self.engine.update_from_response(data)

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return hermes_tools(self.engine, self.name, self._problem, self._call_tool)

    def _call_tool(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        self._start(ctx.session)
        # as Hermes: the conversation so far (an engine may take it in before it answers)
        agent = getattr(ctx.turn, "agent", None)
        extra = {"messages": to_openai(agent.history)} if agent is not None else {}
        with calls.in_home(self.hermes_home):
            return call_with(self.engine.handle_tool_call, tool, args, **extra)

    @hookimpl
    def shutdown(self) -> None:
        with calls.in_home(self.hermes_home):
            unload(self._loaded, self._problem)


def _kept(messages: list[Message], sent: list[dict[str, Any]], out: list[Any]) -> list[Message]:
    """The engine's answer as messages, each one it returned unchanged being the message it was
    given (with its metadata: its usage, its id). Matched in order from the end (an engine keeps
    the newest messages), so of equal texts the latest is the one kept. An answer equal to what
    was sent is therefore the very same history: the kernel sees no progress and keeps the
    session, as Hermes does when it compares the result with what it sent."""
    where: dict[str, list[int]] = collections.defaultdict(list)
    for i, item in enumerate(sent):
        where[_key(item)].append(i)
    converted = from_openai(out)
    kept: list[Message] = []
    bound = len(sent)
    for item, message in zip(reversed(out), reversed(converted), strict=True):
        found = where.get(_key(item), [])
        at = bisect.bisect_left(found, bound) - 1
        if at >= 0:
            bound = found[at]
            message = messages[bound]
        kept.append(message)
    return kept[::-1]


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def engine_class(candidate: HermesCandidate) -> type[HermesContextEngine]:
    return bridged_class(HermesContextEngine, "HermesEngine_", "context engine", candidate)
