"""The ``delegate_task`` tool: the model hands tasks to child agents and gets their answers back.

Each task runs in a child :class:`~hermes_core.agent.Agent` (:meth:`Agent.subagent`): a new
session whose ``parent_session_id`` is the delegating one and whose ``agent_context`` is
``"subagent"`` (archived and searchable like any session, listed by ``sessions show`` of the
parent), on a child host (:meth:`PluginHost.child_host`: the same memory providers, a context
engine instance of its own), with the parent's tools minus the memory-writing ones (or
``delegation.allowed_tools``), and ``delegate_task`` itself only while ``delegation.max_depth``
allows another level. A child's model calls come out of the parent turn's budget (shared; the
parent keeps one call for its answer), so the 70 % and 90 % notes reach the parent's tool
results as well as the child's.

The tasks of one call run in parallel, at most ``delegation.max_parallel`` of them; the rest are
refused with a message. A child that raises, hangs past ``delegation.timeout``, runs out of
budget or is cancelled (the parent's turn was cancelled, or the call passed
``hooks.tool_timeout``) becomes an error line naming what happened; the parent's turn goes on.
After the children, the parent's providers hear ``on_delegation`` once per child.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from hermes_core import hookimpl
from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.turn import CancelToken
from hermes_core.types import EndReason, ToolContext

if TYPE_CHECKING:
    from hermes_core.agent import Agent
    from hermes_core.config import CoreConfig, DelegationSection
    from hermes_core.host import PluginHost
    from hermes_core.turn import TurnContext

__all__ = ["NAME", "SUBAGENT_IDENTITY", "ChildOutcome", "DelegateInput", "TaskSpec", "delegate",
           "register_tools"]

NAME = "delegate_task"
SUBAGENT_IDENTITY = (
    "You are a subagent: another agent delegated one task to you. Work on it with the tools you "
    "have, then finish with a complete, self-contained answer: it is all the delegating agent "
    "will see of your work. You cannot ask the user anything."
)
#: how long a finished child's host may take to hand over its queued calls
_CLOSE_DRAIN = 2.0


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=20_000,
                      description="What the child agent must do, stated completely.")
    context: str | None = Field(default=None, max_length=50_000,
                                description="Background the child needs (it sees nothing of "
                                "this conversation).")


class DelegateInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: list[TaskSpec] = Field(min_length=1, description="One entry per child agent; they run "
                                  "in parallel.")


@dataclass(slots=True)
class ChildOutcome:
    """How one child ended."""

    task: str
    session_id: str
    #: completed, failed, timed_out, budget_exhausted or cancelled
    status: str
    text: str

    def render(self, index: int) -> str:
        head = self.task.splitlines()[0][:80] if self.task.strip() else "(empty)"
        return f"Task {index} ({self.status}, session {self.session_id}): {head}\n{self.text}"


def _allowed_tools(turn: TurnContext, settings: DelegationSection) -> set[str]:
    """The child's tools: the parent's, minus the memory-writing ones (unless listed in
    ``delegation.allowed_tools``), and delegate_task only while another level is allowed."""
    parent_tools = turn.agent.router.tools
    if settings.allowed_tools is not None:
        names = {n for n in settings.allowed_tools if n in parent_tools}
    else:
        names = {n for n, (tool, _plugin) in parent_tools.items() if tool.curation is None}
    if turn.depth + 1 >= settings.max_depth:
        names.discard(NAME)
    return names


def _run_child(child: Agent, host: PluginHost, prompt: str, turn: TurnContext,
               limit: int, token: CancelToken) -> Any:
    """One child's turn, on its own thread; its session and host are closed whatever happens."""
    ended = EndReason.DELEGATED
    try:
        return child.run_turn(prompt, budget=turn.budget.child(limit), cancel=token)
    except BaseException:
        ended = EndReason.ERROR
        raise
    finally:
        try:
            child.close(ended, shutdown_host=False)
        finally:
            host.close_child(_CLOSE_DRAIN)


def _start(fn: Callable[[], Any], name: str) -> concurrent.futures.Future[Any]:
    """Run ``fn`` on a daemon thread (a hung child must not hold the process at exit)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def _wait(futures: list[concurrent.futures.Future[Any]], deadline: float,
          token: CancelToken) -> None:
    """Until every child is done, the deadline passes or the call is cancelled."""
    pending = set(futures)
    while pending and not token.cancelled:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        _done, pending = concurrent.futures.wait(pending, timeout=min(left, 0.05),
                                                 return_when=concurrent.futures.FIRST_COMPLETED)


def _outcome(spec: TaskSpec, session_id: str, future: concurrent.futures.Future[Any],
             token: CancelToken, timeout: float, limit: int) -> ChildOutcome:
    if not future.done():
        if token.cancelled:
            return ChildOutcome(spec.task, session_id, "cancelled",
                                f"Error: the child agent was cancelled ({token.reason}).")
        return ChildOutcome(spec.task, session_id, "timed_out",
                            f"Error: the child agent did not finish within {timeout:g} s "
                            "(delegation.timeout) and was cancelled; nothing of its work came back.")
    exc = future.exception()
    if exc is not None:
        return ChildOutcome(spec.task, session_id, "failed",
                            f"Error: the child agent failed: {type(exc).__name__}: {exc}")
    result = future.result()
    if result.cancelled:
        return ChildOutcome(spec.task, session_id, "cancelled",
                            f"Error: the child agent was cancelled ({token.reason}).")
    if result.budget_exhausted:
        partial = result.reply if result.assistant is not result.user else ""
        why = (f"its {limit} model calls (delegation.child_max_iterations)" if result.iterations
               >= limit else "the model calls left in this turn's shared budget")
        text = f"Error: the child agent used {why} before it answered."
        if partial.strip() and not partial.startswith("(The turn stopped"):
            text += f" Its last words: {partial}"
        return ChildOutcome(spec.task, session_id, "budget_exhausted", text)
    return ChildOutcome(spec.task, session_id, "completed", result.reply)


def delegate(args: DelegateInput, context: ToolContext) -> str:
    """The tool's handler: run the tasks in child agents and return their answers."""
    turn: TurnContext | None = context.turn
    if turn is None:
        raise ToolError("delegate_task runs only inside an agent's turn")
    parent = turn.agent
    settings = parent.host.config.core.delegation
    if turn.depth >= settings.max_depth:
        raise ToolError(f"delegation is {turn.depth} level(s) deep already; delegation.max_depth "
                        f"is {settings.max_depth}: do the task yourself")
    if turn.budget.remaining <= 1:
        raise ToolError("no model calls are left in this turn's budget for a child agent; "
                        "answer with what you have")
    run, refused = args.tasks[:settings.max_parallel], args.tasks[settings.max_parallel:]
    tools = _allowed_tools(turn, settings)
    limit = settings.child_max_iterations
    call = turn.cancel  # cancelled with the parent's turn, or when the call passes its deadline
    started: list[tuple[TaskSpec, str, CancelToken, concurrent.futures.Future[Any]]] = []
    for index, spec in enumerate(run, 1):
        host = parent.host.child_host()
        title = f"Delegated: {spec.task.strip().splitlines()[0][:60]}"
        child = parent.subagent(host, title=title, tools=tools, identity=SUBAGENT_IDENTITY)
        prompt = spec.task if not spec.context else f"{spec.task}\n\nBackground:\n{spec.context}"
        token = call.child()
        job = functools.partial(_run_child, child, host, prompt, turn, limit, token)
        started.append((spec, child.session.id, token,
                        _start(job, name=f"hermes-delegate-{index}")))
    _wait([f for *_rest, f in started], time.monotonic() + settings.timeout, call)
    outcomes = [_outcome(spec, sid, future, token, settings.timeout, limit)
                for spec, sid, token, future in started]
    for _spec, _sid, token, future in started:
        if not future.done():  # hung or cancelled: it stops before its next model call
            token.cancel(call.reason or f"delegation.timeout of {settings.timeout:g} s passed")
    for outcome in outcomes:
        parent.host.hooks.on_delegation(task=outcome.task, result=outcome.text,
                                        child_session_id=outcome.session_id,
                                        status=outcome.status, session=parent.session)
    parts = [o.render(i) for i, o in enumerate(outcomes, 1)]
    if refused:
        first = len(run) + 1
        parts.append(f"Not run: tasks {first}-{len(args.tasks)} ({len(refused)} of "
                     f"{len(args.tasks)}): at most {settings.max_parallel} child agents run per "
                     "call (delegation.max_parallel). Delegate them in a later call if they are "
                     "still needed.")
    text = "\n\n".join(parts)
    if all(o.status != "completed" for o in outcomes):
        raise ToolError(text)
    return text


def _enabled(config: CoreConfig) -> bool:
    return bool(config.delegation.enabled)


TOOL = Tool(
    NAME,
    "Hand one or more self-contained tasks to child agents and get their final answers back. "
    "Each child starts with an empty conversation: state the whole task and give the background "
    "it needs. Several tasks in one call run in parallel. Use it for research or multi-step work "
    "that would fill your context; do small things yourself.",
    delegate,
    input_model=DelegateInput,
    available=_enabled,
)


@hookimpl
def register_tools(register: Callable[[Tool], None]) -> None:
    register(TOOL)
