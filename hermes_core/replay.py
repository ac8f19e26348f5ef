"""Offline replay: run a recorded conversation through the plugin stack with no API key.

A transcript is a JSONL file, one JSON object per line (blank lines are skipped):

* ``{"meta": {...}}`` (optional, first line): free-form description (``title``, ``description``).
* ``{"role": "user", "content": "..."}`` starts a turn.
* ``{"role": "assistant", "content": "...", "tool_calls": [...], "usage": {...}}`` is one model
  response of the current turn. ``tool_calls`` items are ``{"name": ..., "arguments": {...}}``
  with an optional ``"id"``; ``usage`` (optional) holds recorded token counts
  (``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``). A
  response with tool calls must be followed by another assistant line in the same turn; the last
  response of a turn has no tool calls.
* ``{"role": "tool", "tool_call_id": "...", "content": "..."}`` (optional) is what a tool
  returned when the conversation was recorded. Tools are *run* during a replay, through the
  plugins that offer them; recorded results are only compared with the real ones.
* ``{"event": "new_session"}`` ends the session and starts a new one (like ``/new``).

The model's words come from the file (:class:`ReplayLLM`): that is the only fake part. Memory
providers, the context engine and tools are the configured plugins, doing real work. Token usage
is the recorded one when the line has it, otherwise the kernel's 4-characters-per-token estimate
of the request actually sent, so a long transcript reaches the engine's threshold as it would live.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agent import Agent, TurnResult, estimate_tokens
from .errors import HermesCoreError
from .history import read_text
from .host import PluginHost
from .kinds import TOOL_NAME_RE
from .llm import LLMError, LLMFailure, LLMResponse
from .types import MemoryWrite, Message, ToolCall, Usage

if TYPE_CHECKING:
    from .config import LoadedConfig
    from .hooks import Hooks

__all__ = [
    "RecordingHost",
    "ReplayError",
    "ReplayLLM",
    "ReplayReport",
    "Transcript",
    "TranscriptTurn",
    "load_transcript",
    "parse_transcript",
    "replay",
]

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_KEYS = {
    "user": {"role", "content", "timestamp"},
    "assistant": {"role", "content", "tool_calls", "usage", "timestamp"},
    "tool": {"role", "tool_call_id", "content", "name", "timestamp"},
}


class ReplayError(HermesCoreError):
    """A transcript cannot be replayed; the message names the file and line and how to fix it."""


# --------------------------------------------------------------------------------------------------
# The transcript
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RecordedResponse:
    line: int
    text: str
    tool_calls: list[ToolCall]
    usage: Usage | None = None
    #: tool_call_id -> the result recorded with the conversation
    results: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TranscriptTurn:
    line: int
    user: str
    responses: list[RecordedResponse] = field(default_factory=list)
    #: a ``new_session`` event came right before this turn
    new_session: bool = False


@dataclass(slots=True)
class Transcript:
    path: str
    meta: dict[str, Any]
    turns: list[TranscriptTurn]


def load_transcript(path: str | Path) -> Transcript:
    """Read and check a transcript file; :class:`ReplayError` names the line of any problem."""
    p = Path(path)
    text = read_text(p, ReplayError, "give the path of a .jsonl transcript")
    return parse_transcript(text.splitlines(), name=str(p))


def parse_transcript(lines: Sequence[str], *, name: str = "<transcript>") -> Transcript:
    """Parse transcript lines (see the module docstring for the format)."""
    parser = _Parser(name)
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            parser.line(number, raw)
    return parser.finish()


def _open_calls(turn: TranscriptTurn) -> RecordedResponse | None:
    """The turn's last response when its tool calls still wait for results."""
    last = turn.responses[-1] if turn.responses else None
    return last if last is not None and last.tool_calls else None


class _Parser:
    """:func:`parse_transcript`'s state, one non-blank line at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.meta: dict[str, Any] = {}
        self.turns: list[TranscriptTurn] = []
        self.pending_new = False
        self.seen_any = False

    def fail(self, line: int, message: str) -> ReplayError:
        return ReplayError(f"{self.name}, line {line}: {message}")

    def line(self, number: int, raw: str) -> None:
        obj = self._object(number, raw)
        if "meta" in obj:
            if self.seen_any or set(obj) != {"meta"} or not isinstance(obj["meta"], dict):
                raise self.fail(number, 'a {"meta": {...}} line may only be the first line, on '
                                        "its own")
            self.meta = obj["meta"]
            self.seen_any = True
            return
        self.seen_any = True
        if "event" in obj:
            self._event(number, obj, raw)
            return
        role, content = self._role_and_content(number, obj)
        if role == "user":
            self._user(number, content)
            return
        if not self.turns:
            raise self.fail(number, f"the transcript must start with a user line, not {role}")
        if role == "tool":
            self._tool(number, obj, content)
        else:
            self._assistant(number, obj, content)

    def _object(self, number: int, raw: str) -> dict[str, Any]:
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise self.fail(number, f"not valid JSON ({exc.msg} at column {exc.colno}); each "
                                    "line must be one JSON object") from None
        if not isinstance(obj, dict):
            raise self.fail(number, f"expected a JSON object, got {type(obj).__name__}")
        return obj

    def _event(self, number: int, obj: dict[str, Any], raw: str) -> None:
        if obj != {"event": "new_session"}:
            raise self.fail(number, f"unknown event line {raw.strip()[:80]}; the only event is "
                                    '{"event": "new_session"}')
        if self.turns and _open_calls(self.turns[-1]):
            raise self.fail(number, "a session cannot end while tool calls wait for a response")
        self.pending_new = True

    def _role_and_content(self, number: int, obj: dict[str, Any]) -> tuple[str, str]:
        role = obj.get("role")
        if role not in _KEYS:
            raise self.fail(number, f"'role' must be 'user', 'assistant' or 'tool', got {role!r}")
        unknown = set(obj) - _KEYS[role]
        if unknown:
            raise self.fail(number, f"unknown key {sorted(unknown)[0]!r} for a {role} line; "
                                    f"allowed: {', '.join(sorted(_KEYS[role]))}")
        content = obj.get("content", "")
        if not isinstance(content, str):
            raise self.fail(number, f"'content' must be a string, got {type(content).__name__}")
        return role, content

    def _user(self, number: int, content: str) -> None:
        turns = self.turns
        if not content.strip():
            raise self.fail(number, "a user line needs non-empty 'content'")
        if turns and not turns[-1].responses:
            raise self.fail(number, f"the turn starting on line {turns[-1].line} has no "
                                    "assistant response; add an assistant line before this user "
                                    "line")
        if turns and (pending := _open_calls(turns[-1])) is not None:
            raise self.fail(number, f"the tool calls on line {pending.line} are never followed "
                                    "by an assistant response; add one before this user line")
        turns.append(TranscriptTurn(number, content, new_session=self.pending_new))
        self.pending_new = False

    def _tool(self, number: int, obj: dict[str, Any], content: str) -> None:
        pending = _open_calls(self.turns[-1])
        call_id = obj.get("tool_call_id")
        ids = [c.id for c in pending.tool_calls] if pending else []
        if pending is None or call_id not in ids:
            where = f"; the open calls are {', '.join(ids)}" if ids else (
                "; no assistant tool call is waiting for a result")
            raise self.fail(number, f"'tool_call_id' {call_id!r} answers no tool call{where}")
        pending.results[call_id] = content

    def _assistant(self, number: int, obj: dict[str, Any], content: str) -> None:
        turn = self.turns[-1]
        if turn.responses and not turn.responses[-1].tool_calls:
            raise self.fail(number, f"the response on line {turn.responses[-1].line} had no tool "
                                    "calls, so the model's turn was over; start a new turn with a "
                                    "user line")
        calls = _tool_calls(obj.get("tool_calls", []), number, self.fail)
        if not calls and not content.strip():
            raise self.fail(number, "an assistant line needs 'content' text or 'tool_calls'")
        turn.responses.append(RecordedResponse(number, content, calls,
                                               _usage(obj, number, self.fail)))

    def finish(self) -> Transcript:
        if not self.turns:
            raise ReplayError(f"{self.name}: no turns found; a transcript needs at least one user "
                              "line followed by an assistant line")
        last = self.turns[-1]
        if not last.responses:
            raise self.fail(last.line, "the last turn has no assistant response")
        if (pending := _open_calls(last)) is not None:
            raise self.fail(pending.line, "these tool calls are never followed by an assistant "
                                          "response")
        if self.pending_new:
            raise ReplayError(f"{self.name}: the file ends with a new_session event and no turn "
                              "after it")
        return Transcript(self.name, self.meta, self.turns)


def _tool_calls(value: Any, line: int, fail: Callable[[int, str], ReplayError]) -> list[ToolCall]:
    if not isinstance(value, list):
        raise fail(line, "'tool_calls' must be a list of {\"name\": ..., \"arguments\": {...}}")
    calls = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"id", "name", "arguments"}:
            raise fail(line, f"tool_calls[{i}] must be an object with 'name', 'arguments' and "
                             "optionally 'id'")
        name, args = item.get("name"), item.get("arguments", {})
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise fail(line, f"tool_calls[{i}].name {name!r} is not a valid tool name")
        if not isinstance(args, dict):
            raise fail(line, f"tool_calls[{i}].arguments must be a JSON object")
        call_id = item.get("id") or f"toolu_l{line}_{i}"
        if not isinstance(call_id, str):
            raise fail(line, f"tool_calls[{i}].id must be a string")
        calls.append(ToolCall(call_id, name, dict(args)))
    ids = [c.id for c in calls]
    if len(set(ids)) != len(ids):
        raise fail(line, "two tool calls share one id")
    return calls


def _usage(obj: dict[str, Any], line: int, fail: Callable[[int, str], ReplayError]) -> Usage | None:
    raw = obj.get("usage")
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - set(_USAGE_KEYS) or not all(
        isinstance(v, int) and v >= 0 for v in raw.values()
    ):
        raise fail(line, f"'usage' must map some of {', '.join(_USAGE_KEYS)} to whole numbers ≥ 0")
    return Usage(**raw)


# --------------------------------------------------------------------------------------------------
# The LLM side: answers come from the transcript
# --------------------------------------------------------------------------------------------------


class ReplayLLM:
    """A :class:`~hermes_core.llm.ChatLLM` that returns a turn's recorded responses in order."""

    def __init__(self, *, model: str = "replay", chunk_size: int = 24) -> None:
        self.model = model
        self.chunk_size = chunk_size
        self._queue: list[RecordedResponse] = []
        self.calls = 0

    def load_turn(self, turn: TranscriptTurn) -> None:
        self._queue = list(turn.responses)

    @property
    def unused(self) -> list[RecordedResponse]:
        return list(self._queue)

    def respond(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                model: str | None = None, timeout: float | None = None,
                tools: Sequence[dict[str, Any]] | None = None,
                on_text: Callable[[str], None] | None = None) -> LLMResponse:
        if not self._queue:
            raise LLMError("the transcript has no more recorded responses for this turn",
                           failure=LLMFailure.OTHER)
        recorded = self._queue.pop(0)
        self.calls += 1
        usage = recorded.usage or Usage(
            input_tokens=estimate_tokens(list(messages), system, list(tools or [])),
            output_tokens=estimate_tokens([Message("assistant", recorded.text,
                                                   tool_calls=recorded.tool_calls)]),
            model=self.model,
        )
        if on_text is not None:
            for i in range(0, len(recorded.text), self.chunk_size):
                on_text(recorded.text[i:i + self.chunk_size])
        return LLMResponse(text=recorded.text, tool_calls=list(recorded.tool_calls), usage=usage,
                           stop_reason="tool_use" if recorded.tool_calls else "end_turn",
                           model=self.model)

    def complete(self, *, system: str, messages: list[Message], max_tokens: int,
                 model: str | None = None, timeout: float | None = None) -> str:
        return self.respond(system=system, messages=messages, max_tokens=max_tokens).text


# --------------------------------------------------------------------------------------------------
# The driver and its report
# --------------------------------------------------------------------------------------------------


class RecordingHost(PluginHost):
    """A PluginHost that also keeps every memory write the providers report (for the report)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes: list[MemoryWrite] = []

    def notify_memory_write(self, write: MemoryWrite, source: str | None = None) -> None:
        self.writes.append(write)
        super().notify_memory_write(write, source)


class _LogTap(logging.Handler):
    """Collects the kernel's and plugins' warnings and errors during one turn."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class ReplayReport:
    """The whole replay: per-turn records and totals (``as_dict`` is the ``--json`` output)."""

    transcript: str
    meta: dict[str, Any]
    providers: list[str]
    engine: str | None
    tools: list[str]
    model: str
    context_window: int | None
    home: str
    turns: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _turn_record(index: int, turn: TranscriptTurn, result: TurnResult, writes: list[MemoryWrite],
                 previous_prompt: str | None, rebuilds: int, log_lines: list[str],
                 unused: list[RecordedResponse]) -> dict[str, Any]:
    recorded = {cid: text for r in turn.responses for cid, text in r.results.items()}
    prompts = result.system_prompts
    changes = sum(1 for a, b in zip([previous_prompt, *prompts], prompts, strict=False)
                  if a is not None and a != b)
    return {
        "turn": index,
        "line": turn.line,
        "session_id": result.session_id,
        "new_session": turn.new_session,
        "user": turn.user,
        "reply": result.reply,
        "llm_calls": len(result.usage),
        "prefetch": [
            {"provider": r.provider, "status": r.status, "chars": len(r.text), "text": r.text,
             "ms": round(r.seconds * 1000, 2) if r.seconds is not None else None, "error": r.error}
            for r in result.prefetch
        ],
        "recall_chars": len(result.recall_block),
        "memory_writes": [
            {"provider": w.provider, "action": w.action, "target": w.target, "content": w.content,
             "old_text": w.old_text, "origin": w.origin}
            for w in writes
        ],
        "tool_calls": [
            {"name": o.call.name, "plugin": o.plugin, "arguments": o.call.arguments,
             "ok": not o.is_error, "result": o.content, "ms": round(o.seconds * 1000, 2),
             "parallel": o.parallel, "recorded_result": recorded.get(o.call.id),
             "matches_recording": (recorded[o.call.id] == o.content) if o.call.id in recorded
             else None}
            for o in result.tools
        ],
        "compactions": [
            {"trigger": c.trigger, "old_session_id": c.old_session_id,
             "new_session_id": c.new_session_id, "messages_before": c.messages_before,
             "messages_after": c.messages_after, "tokens_before": c.tokens_before,
             "tokens_after": c.tokens_after, "engine": c.engine, "notices": c.notices,
             "summary_chars": len(c.summary or ""), "memory_context_chars": len(c.memory_context),
             "engine_report": c.engine_report, "ms": round(c.seconds * 1000, 2)}
            for c in result.compactions
        ],
        "tokens": {
            "prompt_first_call": result.usage[0].prompt_tokens if result.usage else None,
            "prompt_last_call": result.usage[-1].prompt_tokens if result.usage else None,
            "output": sum(u.output_tokens for u in result.usage),
        },
        "system_prompt": {
            "sha256": _sha(prompts[-1]) if prompts else None,
            #: how often the bytes sent differed from the previous call's
            "changes": changes,
            #: how often the kernel assembled the prompt (compaction, new session)
            "rebuilds": rebuilds,
            # bytes may change only where a compaction or a new session rebuilt the prompt
            "stable": changes <= rebuilds,
        },
        "iterations": result.iterations,
        "budget_exhausted": result.budget_exhausted,
        "unused_recorded_responses": [r.line for r in unused],
        "log": log_lines,
        #: hook implementations that raised, were late or answered wrongly (this turn's, and the
        #: background hooks' of this conversation since the previous turn)
        "notices": list(result.notices),
        "hook_problems": [{"hook": p.hook, "plugin": p.plugin, "status": p.status,
                           "message": p.message} for p in result.problems],
        "ms": round(result.seconds * 1000, 2),
    }


def iter_replay(transcript: Transcript, agent: Agent, llm: ReplayLLM,
                writes: list[MemoryWrite], *, settle: bool = True) -> Iterator[dict[str, Any]]:
    """Run each turn and yield its record (the agent is not closed).

    With ``settle`` (the default) the session's background worker finishes the turn's
    ``sync_turn`` and ``queue_prefetch`` before the next turn starts, as it would while a person
    types the next message; without it, a replay races the worker and recall varies run to run.
    """
    previous_prompt: str | None = None
    tap = _LogTap()
    root = logging.getLogger("hermes_core")
    for index, turn in enumerate(transcript.turns, start=1):
        builds = agent.prompt_builds
        if turn.new_session and index > 1:
            agent.new_session()
        llm.load_turn(turn)
        tap.lines = []
        root.addHandler(tap)
        before = len(writes)
        try:
            result = agent.run_turn(turn.user)
        finally:
            root.removeHandler(tap)
        if settle:  # bounded: a hung provider must not hang a replay
            agent.worker.flush(agent.worker.drain_timeout)
        record = _turn_record(index, turn, result, writes[before:], previous_prompt,
                              agent.prompt_builds - builds, tap.lines, llm.unused)
        previous_prompt = result.system_prompts[-1] if result.system_prompts else previous_prompt
        yield record


def replay(
    transcript: Transcript,
    host: RecordingHost,
    *,
    on_turn: Callable[[dict[str, Any]], None] | None = None,
    settle: bool = True,
) -> ReplayReport:
    """Replay ``transcript`` on ``host`` (activating what its config selects) and report.

    The host is shut down at the end (after the memory worker drained). ``settle``: see
    :func:`iter_replay`.
    """
    from .models import context_window

    llm = ReplayLLM()
    agent = Agent.create(host, llm)
    core = host.config.core
    agent.start()
    report = ReplayReport(
        transcript=transcript.path, meta=transcript.meta,
        providers=[host.instance_name(k) for k in host.providers()],
        engine=host.engine_name,
        tools=agent.router.names(), model=core.llm.model, context_window=context_window(core),
        home=str(host.home),
    )
    started = time.perf_counter()
    try:
        for record in iter_replay(transcript, agent, llm, host.writes, settle=settle):
            report.turns.append(record)
            if on_turn is not None:
                on_turn(record)
    finally:
        drain = agent.close()
    seconds = time.perf_counter() - started
    turns = report.turns
    report.summary = {
        **_turn_summary(turns),
        **_hook_summary(host.hooks),
        "seconds": round(seconds, 3),
        "turns_per_second": round(len(turns) / seconds, 1) if seconds > 0 else None,
        "worker_drain": {"status": drain.status, "abandoned": drain.abandoned},
    }
    return report


def _turn_summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's totals over its turn records."""
    return {
        "turns": len(turns),
        "sessions": len({t["session_id"] for t in turns} | {c["old_session_id"] for t in turns
                                                           for c in t["compactions"]}),
        "llm_calls": sum(t["llm_calls"] for t in turns),
        "tool_calls": sum(len(t["tool_calls"]) for t in turns),
        "tool_errors": sum(1 for t in turns for c in t["tool_calls"] if not c["ok"]),
        "memory_writes": sum(len(t["memory_writes"]) for t in turns),
        "compactions": sum(len(t["compactions"]) for t in turns),
        "prefetch_fresh": sum(1 for t in turns for p in t["prefetch"] if p["status"] == "fresh"),
        "prefetch_late": sum(1 for t in turns for p in t["prefetch"] if p["status"] == "stale"),
        "system_prompt_stable": all(t["system_prompt"]["stable"] for t in turns),
        "logged_problems": sum(len(t["log"]) for t in turns),
    }


def _hook_summary(hooks: Hooks) -> dict[str, int]:
    """The run's hook problems: all of them, the background hooks' and those at shutdown
    included; the stores that raised while recording the conversation (replay exits 1 when
    any); the hooks that timed out."""
    return {
        "hook_problems": hooks.problem_count,
        "write_failures": sum(1 for p in hooks.problems if p.status == "error"
                              and p.hook in ("on_message", "sync_turn", "on_session_switch",
                                             "on_session_end")),
        "hooks_timed_out": sum(1 for p in hooks.problems if p.status in ("timed_out", "queued")),
    }


def build_host(config: LoadedConfig, home: Path, *, providers: list[str] | None = None,
               keep_key: bool = False, **load: Any) -> RecordingHost:
    """A :class:`RecordingHost` for ``home`` with the config's plugins (entry points, home plugins;
    ``load``: more keywords of :meth:`PluginHost.load <hermes_core.host.PluginHost.load>`).

    ``providers`` replaces ``memory.providers``. Unless ``keep_key``, the API key is removed from
    the config, so plugins that call the LLM themselves (the compressor's summariser) fall back to
    their offline paths and a replay never spends tokens.
    """
    core = config.core
    if providers is not None:
        core.memory.providers = list(providers)
    if not keep_key:
        core.llm.api_key = None
    host = RecordingHost.load(home, config=config, **load)
    assert isinstance(host, RecordingHost)  # load() builds an instance of the class it is called on
    return host
