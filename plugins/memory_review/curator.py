"""The memory review, the pre-compaction flush and the skill nudge (built-in plugin ``memory_review``).

The plugin (:mod:`hermes_core.plugins.memory_review`) takes part in a conversation through the
agent's hooks: ``on_turn_begin`` (:meth:`Curator.begin_turn`), ``tool_batch_note`` after each tool
batch (:meth:`Curator.skill_nudge`), ``pre_compaction_flush`` before each compaction
(:meth:`Curator.flush`), ``on_turn_end`` when a turn has produced its reply
(:meth:`Curator.end_turn`, which may queue a review), ``on_agent_reset`` (``/new``) and
``on_agent_close``.

**Background review.** Every ``memory.nudge_interval`` user turns (never before
``memory.flush_min_turns``) a review reads the conversation with the auxiliary model and may call
the memory tool (the tool whose :class:`~hermes_core.kinds.Curation` role is ``memory``). It
runs on the plugin's disposable lane for the conversation (``PluginHost.run_later``) after
``run_turn`` has returned, so it never delays a reply. What it may touch is deliberately narrow,
each point a fix of a Hermes incident:

* it calls the *session's own* memory tool, the one the model uses: the same handler, store
  and lock, never a second store over the same files (duplicate extraction), under a session id
  of its own (``<session>:review``) so its refused attempts never count against the
  foreground turn's retry allowance (shared state across threads);
* none of its messages reach any plugin: no ``on_message`` (nothing in the archive), no
  ``sync_turn`` or ``prefetch`` (nothing leaks into external memory), no engine hook (it can never
  trigger or race a compaction);
* it is bounded: ``memory.review_timeout`` wall-clock seconds (an answer arriving later is thrown
  away, its tool calls unapplied), ``memory.review_max_calls`` model calls of at most
  ``memory.review_max_tokens`` tokens, over at most ``memory.review_input_tokens`` of history.

Writes it makes are mirrored to the other providers by the memory tool itself
(``on_memory_write``) and announced as notices: ``memory updated: ...``.

**Pre-compaction flush.** Before a compaction, one model call offering only the memory tool
asks the model to save what the summary could lose; its tool calls are applied and the exchange is
then dropped (it is never part of the history, the archive or any hook's messages).

**Skill nudge.** Every ``Curation.nudge_interval`` tool-loop iterations without a call of the tool
whose curation role is ``procedures``, its reminder that a reusable procedure can be saved rides on the
batch's last tool result, like the iteration budget's notes (the system prompt is never touched).

The plugin knows these tools by their :class:`~hermes_core.kinds.Curation` only, never by name:
the plugin that offers one says how the review should use it (``instructions``), what its store
holds (``snapshot``) and what a call changed (``describe``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hermes_core.results import CurationReport
from hermes_core.toolrun import ToolOutcome, ToolRouter
from hermes_core.types import Message, Session, ToolCall

if TYPE_CHECKING:
    from hermes_core.host import PluginHost
    from hermes_core.kinds import Tool
    from hermes_core.llm import ChatLLM, LLMResponse

__all__ = [
    "DEFAULT_NUDGE",
    "FLUSH_PROMPT",
    "REVIEW_PROMPT",
    "REVIEW_SYSTEM",
    "CurationJob",
    "CurationReport",
    "Curator",
    "curation_tools",
    "fit_history",
    "make_job",
    "review_session",
]

log = logging.getLogger("hermes_core.curation")  # the logger name the logs always used
#: the plugin whose lanes the reviews run on
PLUGIN = "memory_review"

REVIEW_PROMPT = (
    "[Memory review — a maintenance pass, not a message from the user.] Look back over the "
    "conversation above and decide what belongs in long-term memory. In order of priority: the "
    "user's preferences and their corrections of how you work; lasting facts about the user and "
    "their environment; recurring patterns or lessons. Task details only if they will matter "
    "again. Use the {tool} tool. When the conversation shows an entry to be wrong or stale, "
    "replace or remove it rather than adding a near-duplicate, and skip what is already stored. "
    "If nothing is worth saving, answer \"Nothing to save.\" Do not continue the conversation; "
    "the {tool} tool is the only tool available."
)
FLUSH_PROMPT = (
    "[Before compaction — a maintenance step, not a message from the user.] The earlier part of "
    "this conversation is about to be replaced by a summary, and its details will be gone from "
    "your context. Save now, with the {tool} tool, anything worth keeping beyond this "
    "conversation: first the user's preferences, corrections and recurring patterns, then task "
    "details that will matter again. Skip what is already stored. If nothing needs saving, "
    "answer \"Nothing to save.\" The {tool} tool is the only tool available."
)
#: the system prompt of a review run outside a live agent (``hermes-core sessions review``)
REVIEW_SYSTEM = (
    "You maintain an assistant's long-term memory: short, durable entries about the user and "
    "their work that the assistant sees at the start of every conversation."
)
#: the reminder of a ``procedures`` curation tool that gives no ``nudge`` of its own
DEFAULT_NUDGE = (
    "[Reminder: if the work so far took several steps, trial and error or a correction from the "
    "user, and is likely to come up again, consider saving the procedure with the {tool} tool "
    "once the task is done.]"
)
#: tool results longer than this are shortened in what a review or flush reads
_RESULT_CHARS = 2000


def curation_tools(tools: Mapping[str, tuple[Tool, str]], role: str) -> list[tuple[Tool, str]]:
    """The ``(tool, plugin)`` entries of ``tools`` whose curation role is ``role``, in order."""
    return [entry for entry in tools.values()
            if entry[0].curation is not None and entry[0].curation.role == role]


@dataclass(slots=True)
class CurationJob:
    """What a review or flush works on: a snapshot taken on the agent's thread."""

    session: Session
    messages: list[Message]
    system: str
    memory_tool: tuple[Tool, str]  #: the session's own memory tool and its plugin


def make_job(host: PluginHost, router: ToolRouter, session: Session, messages: list[Message],
             system: str) -> CurationJob | None:
    """A job over the session's own memory tool (curation role ``memory``); ``None`` when no
    active plugin offers one. With several, the first in the router's order is used."""
    found = curation_tools(router.tools, "memory")
    if not found:
        return None
    if len(found) > 1:
        log.info("several memory curation tools are offered (%s); the review uses %r",
                 ", ".join(t.name for t, _ in found), found[0][0].name)
    return CurationJob(session, list(messages), system, found[0])


def _estimate(message: Message) -> int:
    chars = len(message.content) + 16
    for call in message.tool_calls:
        chars += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False)) + 24
    return (chars + 3) // 4


def fit_history(messages: Sequence[Message], budget: int) -> tuple[list[Message], int]:
    """The newest part of ``messages`` that fits ``budget`` estimated tokens, and how many were
    left out. Long tool results are shortened first; the kept part starts at a user message so
    the request stays well-formed (no tool result without its call)."""
    shortened = [
        Message(m.role, m.content[:_RESULT_CHARS] + f"\n[... {len(m.content) - _RESULT_CHARS} "
                "characters not shown]", tool_call_id=m.tool_call_id, tool_name=m.tool_name,
                meta=m.meta)
        if m.role == "tool" and len(m.content) > _RESULT_CHARS else m
        for m in messages
    ]
    suffix = 0
    starts: list[int] = []  # user-message indexes whose suffix fits, newest first
    last_user = None
    for index in range(len(shortened) - 1, -1, -1):
        suffix += _estimate(shortened[index])
        if shortened[index].role == "user":
            last_user = index if last_user is None else last_user
            if suffix <= budget:
                starts.append(index)
    if starts:
        cut = starts[-1]
    elif last_user is not None:
        cut = last_user  # even the last exchange is over budget: send it anyway, shortened
    else:
        return [], len(shortened)
    return shortened[cut:], cut


def _describe(tool: Tool, call: ToolCall, outcome: ToolOutcome) -> list[str]:
    """Human descriptions of the changes a successful call of the memory tool made."""
    if outcome.is_error:
        return []
    describe = tool.curation.describe if tool.curation is not None else None
    if describe is None:
        return [f"{tool.name} called"]
    try:
        return [str(line) for line in describe(dict(call.arguments), outcome.content)]
    except Exception as exc:  # plugin code: a failure only costs the notice
        log.warning("the %s tool's curation describe() raised %s: %s", tool.name,
                    type(exc).__name__, exc)
        return []


def _model_failed(kind: str, job: CurationJob, report: CurationReport, exc: Exception) -> None:
    """Record and log a model call that raised; nothing was written."""
    report.error = f"{type(exc).__name__}: {exc}"
    # no key configured is a setup choice (e.g. a replay), not an incident
    from hermes_core.llm import LLMError, LLMFailure

    unset = isinstance(exc, LLMError) and exc.failure == LLMFailure.NOT_CONFIGURED
    level = logging.INFO if unset else logging.WARNING
    log.log(level, "memory %s of session %s: the model failed (%s); nothing was "
            "written", kind, job.session.id, report.error)


def _run_calls(tool: Tool, router: ToolRouter, session: Session, response: LLMResponse,
               report: CurationReport) -> list[Message]:
    """Run the memory tool calls of ``response`` (recorded in ``report``); the assistant
    message and its tool results, to append to the conversation."""
    outcomes = [router.run_one(call, session) for call in response.tool_calls]
    report.tools.extend(outcomes)
    for call, outcome in zip(response.tool_calls, outcomes, strict=True):
        report.writes.extend(_describe(tool, call, outcome))
    return [Message("assistant", response.text, tool_calls=list(response.tool_calls)),
            *[Message("tool", o.content, tool_call_id=o.call.id, tool_name=o.call.name,
                      meta={"is_error": True} if o.is_error else {}) for o in outcomes]]


class Curator:
    """One conversation's curation state: nudge counters, the queued review, notices."""

    def __init__(self, host: PluginHost, llm: ChatLLM | None = None, *, prior_user_turns: int = 0,
                 on_notice: Callable[[str], None] | None = None) -> None:
        core = host.config.core
        memory = core.memory
        self.host = host
        self._llm = llm
        self.on_notice = on_notice
        self.interval = memory.nudge_interval
        self.min_turns = memory.flush_min_turns
        self.flush_enabled = memory.flush_before_compaction
        self.timeout = memory.review_timeout
        self.max_calls = memory.review_max_calls
        self.max_tokens = memory.review_max_tokens
        self.input_tokens = memory.review_input_tokens
        self.model = core.llm.auxiliary_model or core.llm.model
        #: user turns of the conversation so far (a resumed history's included)
        self.user_turns = prior_user_turns
        # A resumed conversation keeps its place in the review cycle (Hermes restarted it at 0).
        self.since_review = prior_user_turns % self.interval if self.interval else 0
        self.tool_iterations = 0  #: since the last call of a procedures curation tool, or nudge
        self.reports: deque[CurationReport] = deque(maxlen=32)
        self._notices: list[str] = []
        self._lock = threading.Lock()
        self._done: threading.Event | None = None  #: set once the queued review has ended
        self._started = threading.Event()  #: set when the queued review began to run
        self._cancel = threading.Event()
        self._deadline = 0.0  #: time.monotonic() at which the running review's bound passes

    @property
    def llm(self) -> ChatLLM:
        """The LLM reviews and flushes use: the one given, else the auxiliary model client
        (``llm.auxiliary_client``, :meth:`PluginHost.llm`) on first use. Not the agent's own by
        default, on purpose: like the compressor's summariser, curation is an auxiliary job,
        and a replayed transcript (whose LLM serves only the recorded turn responses) must not
        feed it."""
        if self._llm is None:
            self._llm = self.host.llm("auxiliary")
        return self._llm

    # ------------------------------------------------------------------------- turn points

    def begin_turn(self) -> None:
        self.user_turns += 1

    def end_turn(self, outcomes: Sequence[ToolOutcome], job: Callable[[], CurationJob | None], *,
                 memory_tools: Collection[str]) -> bool:
        """Count the finished turn; start a review when one is due. True if one started.

        ``memory_tools`` names the session's memory curation tools: a turn that called one
        successfully restarts the count."""
        if self.interval == 0:
            return False
        if any(o.call.name in memory_tools and not o.is_error for o in outcomes):
            self.since_review = 0  # the model is curating by itself: start the count afresh
            return False
        self.since_review += 1
        if self.since_review < self.interval or self.user_turns < self.min_turns:
            return False
        if self.busy:
            return False  # still due: retried at the end of the next turn
        self.since_review = 0
        snapshot = job()
        if snapshot is None:
            return False  # no memory tool in this session: nothing a review could do
        self._cancel.clear()
        deadline = self._deadline = time.monotonic() + self.timeout
        done, started = self._done, self._started = threading.Event(), threading.Event()

        def review() -> None:
            started.set()
            try:  # its bound counts from now, as a thread of its own started now would have
                self._background(snapshot, deadline)
            finally:
                done.set()

        # on the plugin's disposable lane for this conversation: never waited for by the turn,
        # and a shutdown does not wait for it either (close() below gives it its bound)
        if not self.host.run_later(review, f"memory review of {snapshot.session.id}",
                                   plugin=PLUGIN, kind="disposable", session=snapshot.session):
            done.set()
            return False  # the host is closing: no review any more
        return True

    def skill_nudge(self, router: ToolRouter, calls: Sequence[ToolCall]) -> str | None:
        """The reminder to append to this batch's last tool result, or ``None``."""
        found = curation_tools(router.tools, "procedures")
        if not found:
            return None
        tool = found[0][0]
        if any(call.name in {t.name for t, _ in found} for call in calls):
            self.tool_iterations = 0
            return None
        curation = tool.curation
        assert curation is not None
        if curation.nudge_interval <= 0:
            return None
        self.tool_iterations += 1
        if self.tool_iterations < curation.nudge_interval:
            return None
        self.tool_iterations = 0
        return curation.nudge or DEFAULT_NUDGE.format(tool=tool.name)

    def flush(self, job: CurationJob | None) -> CurationReport | None:
        """The pre-compaction flush (on the caller's thread); ``None`` when it does not apply."""
        if job is None or not self.flush_enabled or self.user_turns < self.min_turns:
            return None
        return self.run("flush", job)

    def reset(self) -> None:
        """A new conversation (``/new``): counters start again."""
        self.user_turns = self.since_review = self.tool_iterations = 0

    # --------------------------------------------------------------------------- reviewing

    def _background(self, job: CurationJob, deadline: float) -> None:
        try:
            self.run("review", job, deadline=deadline)
        except Exception:  # logged here, with the session, rather than by the lane
            log.exception("memory review of session %s failed", job.session.id)

    def run(self, kind: Literal["review", "flush"], job: CurationJob, *,
            deadline: float | None = None) -> CurationReport:
        """Run a review or flush to the end, within its bounds (``deadline``: when the time bound
        passes, default ``memory.review_timeout`` from now); never raises for the model."""
        started = time.monotonic()
        deadline = started + self.timeout if deadline is None else deadline
        history, omitted = fit_history(job.messages, self.input_tokens)
        report = CurationReport(kind, job.session.id, omitted_messages=omitted)
        tool = job.memory_tool[0]
        messages = [*history, Message("user", self._prompt(kind, job, omitted))]
        router = ToolRouter({tool.name: job.memory_tool}, hooks=self.host.hooks)
        # The memory tool keys its per-turn retry allowance by session id: a session id of its
        # own keeps the review's refusals away from the foreground turn's count. It carries the
        # conversation's user key: with memory.scope: user the tool writes that user's memory.
        attributes: dict[str, object] = {"origin": f"memory_{kind}",
                                         "origin_session_id": job.session.id}
        if job.session.user_id is not None:
            attributes["user_id"] = job.session.user_id
        tool_session = Session(id=f"{job.session.id}:{kind}", platform=job.session.platform,
                               model=self.model, parent_session_id=job.session.id,
                               attributes=attributes)
        for _ in range(self.max_calls if kind == "review" else 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._cancel.is_set():
                report.timed_out = True
                break
            try:
                response = self.llm.respond(system=job.system, messages=messages,
                                            max_tokens=self.max_tokens, model=self.model,
                                            timeout=remaining, tools=router.schemas())
            except Exception as exc:  # LLMError, or a ChatLLM that raises something else
                _model_failed(kind, job, report, exc)
                break
            report.calls += 1
            if time.monotonic() > deadline or self._cancel.is_set():
                report.timed_out = True  # too late: applying it now could outlive the agent
                break
            if not response.tool_calls:
                break
            messages += _run_calls(tool, router, tool_session, response, report)
        self._finish(kind, job, report, started)
        return report

    def _prompt(self, kind: Literal["review", "flush"], job: CurationJob, omitted: int) -> str:
        """The instruction that closes the conversation shown to the model."""
        tool = job.memory_tool[0]
        prompt = (REVIEW_PROMPT if kind == "review" else FLUSH_PROMPT).format(tool=tool.name)
        if tool.curation is not None and tool.curation.instructions:
            prompt += " " + tool.curation.instructions
        if omitted:
            prompt += f"\n(The {omitted} earliest messages of the conversation are not shown.)"
        return prompt + self._entries_text(job)

    def _finish(self, kind: str, job: CurationJob, report: CurationReport, started: float) -> None:
        """Log a timeout, time and keep the report, and pass its notice on."""
        if report.timed_out:
            log.warning("memory %s of session %s passed its %.0f s bound; a late answer was "
                        "discarded", kind, job.session.id, self.timeout)
        report.seconds = time.monotonic() - started
        self.reports.append(report)
        if report.notice:
            self._notify(report.notice)

    def _entries_text(self, job: CurationJob) -> str:
        curation = job.memory_tool[0].curation
        if curation is None or curation.snapshot is None:
            return ""
        try:
            text = curation.snapshot()
        except Exception as exc:  # plugin code: a failure only costs the listing
            log.warning("cannot list the %s tool's entries for the memory %s: %s",
                        job.memory_tool[0].name, "review", exc)
            return ""
        return f"\n\n{text}" if text else ""

    # ----------------------------------------------------------------------------- notices

    def _notify(self, text: str) -> None:
        with self._lock:
            self._notices.append(text)
        callback = self.on_notice
        if callback is not None:
            try:
                callback(text)
            except Exception as exc:  # a front end's printing problem must not stop curation
                log.error("on_notice callback raised %s: %s", type(exc).__name__, exc)

    def take_notices(self) -> list[str]:
        """The notices produced since the last call (for the next TurnResult)."""
        with self._lock:
            out, self._notices = self._notices, []
        return out

    # ---------------------------------------------------------------------------- lifecycle

    @property
    def busy(self) -> bool:
        """Whether a background review is running, or queued and still within its bound (one
        still waiting on the lane after it would have nothing left to run, and is not counted)."""
        done = self._done
        if done is None or done.is_set():
            return False
        return self._started.is_set() or time.monotonic() <= self._deadline

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a running review; True when none is running any more."""
        done = self._done
        if done is not None:
            done.wait(timeout)
        return not self.busy

    def close(self, timeout: float | None = None, *, limit: float | None = None) -> bool:
        """Give a running review up to ``timeout`` (default: what is left of its own bound, plus
        a second to apply an answer that came in time; at most ``limit``), then cancel it: a
        cancelled review applies nothing more. True when it finished in time."""
        if timeout is None:
            timeout = max(0.0, self._deadline - time.monotonic()) + 1.0
        if limit is not None:
            timeout = min(timeout, limit)
        finished = self.wait(timeout)
        if not finished:
            self._cancel.set()
            log.warning("a memory review was still running at shutdown; it was cancelled and "
                        "will write nothing more")
        return finished


def review_session(host: PluginHost, session: Session, messages: list[Message], *,
                   llm: ChatLLM | None = None) -> CurationReport:
    """Run a memory review now over a stored conversation (``hermes-core sessions review``).

    ``host`` must have its memory providers activated: the review calls their memory tool (the
    one whose curation role is ``memory``), whose writes are mirrored to the others as usual.
    Raises :class:`~hermes_core.errors.HermesCoreError` when no active plugin offers one.
    """
    from hermes_core.errors import HermesCoreError

    job = make_job(host, ToolRouter.from_host(host), session, messages, REVIEW_SYSTEM)
    if job is None:
        raise HermesCoreError(
            "no active memory provider offers a memory tool (a tool with Curation(role='memory')), "
            "so there is nothing to review into; add one to memory.providers "
            "(hermes-core plugins list shows what is installed)"
        )
    return Curator(host, llm).run("review", job)
