"""The agent loop: one conversation, and the whole path of a turn through the plugins, in order.

Read :meth:`Agent.run_turn` top to bottom; each step names the hook it calls. The helpers it uses
live in role-named modules: :mod:`.fence` (recall fencing, the stream scrubber),
:mod:`.prefetch` (the deadline runner), :mod:`.toolrun` (routing, parallel batches, budget),
:mod:`._prompt` (the system prompt) and :mod:`._compacting` (the engine's pass of a compaction).
What plugin modules add at the agent's own points (:mod:`._agent_hookspecs`: the built-in
``memory_review``'s background review, pre-compaction flush and skill nudge) goes through
``on_turn_begin``, ``tool_batch_note``, ``pre_compaction_flush``, ``on_turn_end``,
``on_agent_reset`` and ``on_agent_close``.

A conversation is a chain of sessions: a compaction continues it in a child session
(``parent_session_id`` = the old id), so the :class:`Agent` outlives its sessions. The kernel only
talks to plugins through hooks: the context engine hears of each turn (``on_turn_start``) and of
the size of the system prompt and tool list (``on_prompt_assembled``), and its
``CompressionResult.report`` is copied into the compaction record. What a tool needs from the
kernel travels on the :class:`~hermes_core.kinds.Tool` itself: its prompt ``guidance`` and its part
in curation (``Tool.curation``).

Every hook call goes through the host's typed facade (``host.hooks``, :mod:`hermes_core.hooks`):
pluggy's order, ``firstresult`` and wrappers, each implementation isolated and bounded by its
deadline. What the turn does not wait for (``sync_turn``, ``queue_prefetch``, the session
boundaries) goes through ``host.hooks.later``: queued on each provider's lane for this
conversation, counted on :attr:`Agent.worker` (the conversation's backlog: flushed on demand,
drained with a bound at close). A hook that raises, is late or returns the wrong type is
recorded with the plugin's name (on :attr:`TurnResult.problems` and in the log) and the turn
goes on. Only the LLM call itself can fail a turn
(:class:`~hermes_core.llm.LLMError`); the user message is archived by then and stays in the history.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

from . import clock, deprecations
from ._backlog import Backlog, DrainReport
from ._compacting import EnginePass, engine_pass, over_hygiene_line, server_pass
from ._prompt import DEFAULT_IDENTITY, compose_system_prompt
from .embeddings import turn_in_flight
from .errors import NotStored
from .fence import StreamScrubber, build_block, scrub
from .prefetch import PrefetchRunner
from .results import CompactionRecord, TurnResult, estimate_tokens, reported_prompt_tokens, retried_turn
from .toolrun import IterationBudget, ToolOutcome, ToolRouter
from .turn import CancelToken, TurnContext
from .types import EndReason, Message, Session, SwitchReason, ToolCall

if TYPE_CHECKING:
    from .hooks import HookOutcome, HookProblem
    from .host import PluginHost
    from .llm import ChatLLM, LLMResponse

__all__ = [
    "DEFAULT_IDENTITY",
    "Agent",
    "CompactionRecord",
    "TurnResult",
    "estimate_tokens",
    "new_session_id",
]

log = logging.getLogger("hermes_core.agent")

#: hooks that store the conversation: an error in one is a write failure the user is told of
_WRITE_HOOKS = frozenset({"on_message", "sync_turn", "on_session_switch", "on_session_end"})
#: automatic compactions one turn may trigger (a guard on top of the engine's own)
MAX_COMPACTIONS_PER_TURN = 3


def new_session_id() -> str:
    """A sortable, unique session id: ``20250301_142233_a1b2c3`` (from :func:`clock.now`, so a
    harness that pins the clock gets ids of its dates)."""
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(clock.now()))
    return f"{stamp}_{secrets.token_hex(3)}"


class Agent:
    """One conversation over a loaded :class:`~hermes_core.host.PluginHost`.

    The host's memory providers and context engine must already be activated (see
    :meth:`create`). ``session`` and ``history`` resume an earlier session; otherwise a new one
    starts. Turns are serialised: one at a time per agent.

    ``last_prompt_tokens`` is the prompt size the API last reported for a resumed session; by
    default it is read from the ``meta["usage"]`` of the history's last assistant message (the
    agent stores each call's usage there). It makes the pre-turn hygiene check exact (else the
    history is estimated).
    ``on_notice`` receives each notice ("memory updated: ...") as it happens, possibly on a
    background thread; the same notices are also attached to the next :class:`TurnResult`
    (settable, e.g. by a chat front end). ``aux_llm`` serves the plugins' auxiliary jobs, such as
    the memory review and flush (default: built from ``llm.*`` with ``llm.auxiliary_model``, see
    :meth:`PluginHost.llm`).

    ``tools`` limits the session's tools to those names; ``identity`` replaces the system
    prompt's first part (SOUL.md); ``depth`` is how many delegations deep this agent runs (see
    :meth:`subagent`). A ``session`` whose ``agent_context`` is ``"subagent"`` is a new session,
    never a resumed one.
    """

    def __init__(
        self,
        host: PluginHost,
        llm: ChatLLM,
        *,
        session: Session | None = None,
        history: list[Message] | None = None,
        platform: str = "cli",
        last_prompt_tokens: int | None = None,
        on_notice: Callable[[str], None] | None = None,
        aux_llm: ChatLLM | None = None,
        tools: Collection[str] | None = None,
        identity: str | None = None,
        depth: int = 0,
    ) -> None:
        core = host.config.core
        if host.engine is None and core.memory.providers and not host.providers():
            log.warning("Agent(host, llm) on a host where nothing is activated: this session has "
                        "no memory provider, no memory tools and no context engine; build it with "
                        "Agent.create(host, llm) to activate memory.providers and context.engine")
        self.host = host
        self.llm = llm
        self.max_tokens = core.llm.max_tokens
        self.max_iterations = core.llm.max_iterations
        self.resumed = session is not None and session.agent_context == "primary"
        self.allowed_tools = None if tools is None else frozenset(tools)
        self.identity = identity
        self.depth = depth
        self.session = session or Session(id=new_session_id(), platform=platform, model=core.llm.model)
        self.history: list[Message] = list(history or [])
        self.system_prompt = ""
        self.router = ToolRouter({})
        self.tool_schemas: list[dict[str, Any]] = []
        self.last_prompt_tokens: int | None = (
            last_prompt_tokens if last_prompt_tokens is not None else reported_prompt_tokens(self.history))
        self.turns = 0
        self.prompt_builds = 0
        self._prefetch = PrefetchRunner(host, timeout=core.memory.prefetch_timeout)
        #: this conversation's calls queued on the plugins' lanes (``host.hooks.later``)
        self.worker = Backlog(str(self.session.attributes.get("conversation_key") or self.session.id),
                              drain_timeout=core.memory.worker_drain_timeout)
        #: receives each notice as it happens (see the class doc)
        self.on_notice = on_notice
        #: the auxiliary model client given, for the plugins' jobs (None: ``host.llm("auxiliary")``)
        self.aux_llm = aux_llm
        self._hygiene_due = self.resumed and bool(self.history)
        self._lock = threading.RLock()
        self._started = False
        self._closed = False
        self._session_ids = {self.session.id}
        self._turn_thread: int | None = None
        self._cancel: CancelToken | None = None
        self._problems: list[HookProblem] = []
        self._problem_lock = threading.Lock()
        self._unsubscribe = host.hooks.subscribe(self._on_problem)

    @classmethod
    def create(cls, host: PluginHost, llm: ChatLLM | None = None, **kwargs: Any) -> Agent:
        """Activate what the config selects (``memory.providers``, ``context.engine``) and build an
        agent; ``llm`` defaults to the client ``llm.client`` selects (:meth:`PluginHost.llm`)."""
        core = host.config.core
        host.activate_memory_providers()  # once per host: what is active already is kept
        if host.engine is None:
            host.activate("context-engine", core.context.engine, config_key="context.engine")
        return cls(host, llm if llm is not None else host.llm("main"), **kwargs)

    @property
    def engine(self) -> object | None:
        """The active context engine instance, if any."""
        return self.host.engine

    def _on_problem(self, problem: HookProblem) -> None:
        """Keep the hook problems of this conversation for the next :class:`TurnResult`."""
        mine = (problem.session_id in self._session_ids if problem.session_id is not None
                else threading.get_ident() == self._turn_thread)
        if mine:
            with self._problem_lock:
                self._problems.append(problem)

    def take_problems(self) -> list[HookProblem]:
        """The hook problems recorded since the last call (a turn's result takes them too)."""
        with self._problem_lock:
            out, self._problems = self._problems, []
        return out

    # ----------------------------------------------------------------------------- the session

    def start(self) -> None:
        """Begin the session: tell the providers (on queued), assemble the system prompt once."""
        with self._lock:
            if self._started:
                return
            if self._closed:
                raise RuntimeError("this agent is closed; create a new one")
            self._assemble()  # first: a tool-name collision must stop the session before it starts
            reason = (SwitchReason.DELEGATION if self.session.agent_context == "subagent"
                      else SwitchReason.RESUME if self.resumed else SwitchReason.NEW)
            self.host.hooks.later.on_session_switch(new_session=self.session, old_session=None,
                                                    reason=reason, backlog=self.worker)
            self._started = True

    def _assemble(self) -> None:
        """Build the tool list and the system prompt; kept byte-identical until the next compaction."""
        self.router = ToolRouter.from_host(self.host, self.allowed_tools)
        self.tool_schemas = self.router.schemas()
        self.system_prompt = compose_system_prompt(self.host, self.router, self.session, self.identity)
        self.prompt_builds += 1
        overhead = estimate_tokens([], self.system_prompt, self.tool_schemas)
        self.host.hooks.on_prompt_assembled(session=self.session, overhead_tokens=overhead)
        deprecations.engine_overhead(self.engine, overhead)

    # ---------------------------------------------------------------------------------- a turn

    def run_turn(self, text: str, *, on_text: Callable[[str], None] | None = None,
                 message_id: str | None = None, budget: IterationBudget | None = None,
                 cancel: CancelToken | None = None) -> TurnResult:
        """Run one user turn and return its result; ``on_text`` receives the reply as it streams.

        ``budget`` is the model calls the turn may make (default: ``llm.max_iterations`` of its
        own; a delegated child gets a share of its parent's, see :meth:`IterationBudget.child`).
        ``cancel`` stops the turn before its next model call once cancelled (as :meth:`cancel`
        does); the result then has ``cancelled`` set.

        ``message_id`` (the sender's id of the message) is stored on the user message
        (``meta["message_id"]``). When the history's last user message is that id and text (a
        turn cut short after storing it, retried), it is not stored a second time: its stored
        reply is returned when the cut turn got that far, else the turn goes on from it.
        """
        if not isinstance(text, str):
            raise TypeError(f"a user message must be a str, got {type(text).__name__}")
        # background embedding (the archive's indexer) waits while a turn runs
        with self._lock, turn_in_flight():
            self._turn_thread = threading.get_ident()
            self.start()
            stored, answer = retried_turn(self.history, text, message_id)
            if stored is not None and answer is not None:  # the cut turn had been answered
                return TurnResult(answer.content, self.session.id, stored, answer)
            started = time.perf_counter()
            # 0. Hygiene: a resumed history that outgrew the window is compacted before anything.
            hygiene = self._hygiene()
            self.turns += 1
            self.host.hooks.on_turn_begin(agent=self)
            self.host.hooks.on_turn_start(session=self.session)
            deprecations.engine_turn_start(self.engine)

            # 1. The user message joins the history and is archived at once (on_message).
            user = stored or self._store_user(text, message_id)

            # 2. Recall under the deadline (prefetch); fenced, for the API copy of this message only.
            recall = self._prefetch.run(text, self.session)
            block = build_block([(r.provider, r.text) for r in recall])

            result = TurnResult("", self.session.id, user, user, prefetch=recall, recall_block=block)
            if hygiene is not None:
                result.compactions.append(hygiene)
            budget = budget or IterationBudget(self.max_iterations)
            token = self._cancel = cancel or CancelToken()
            turn = TurnContext(self, budget, token, self.depth)
            scrubber = StreamScrubber()
            while True:
                if token.cancelled:  # Agent.cancel(), or the delegating call gave up on this one
                    result.cancelled = True
                    break
                # 3. Context engine: compact first when should_compress says so.
                self._maybe_compact(result)
                # 4. The LLM call (counted first: a shared budget may have no call left), then
                #    update_from_response with its usage.
                if not budget.take():
                    result.budget_exhausted = True
                    break
                response = self._call_llm(user, block, scrubber, on_text, result)
                if response.compaction is not None:  # the server compacted what came before
                    result.compactions.append(self._server_compaction(user, response.compaction))
                self.host.hooks.update_from_response(usage=response.usage)
                self.last_prompt_tokens = response.usage.prompt_tokens or None
                meta: dict[str, Any] = {"usage": response.usage.as_meta()}
                if response.compaction is not None:
                    meta["compaction"] = response.compaction  # sent back with this message
                assistant = Message("assistant", scrub(response.text), tool_calls=list(response.tool_calls),
                                    meta=meta)
                self.history.append(assistant)
                self._emit(assistant)
                result.assistant = assistant
                if not response.tool_calls:
                    break
                # 5. Tools: routed to their plugins.
                result.tools.extend(self._run_tools(response.tool_calls, budget, turn))
                if budget.exhausted:
                    result.budget_exhausted = True
                    break

            self._cancel = None
            # 6. Turn end: sync_turn, then queue_prefetch, queued on each provider's lane for this
            #    conversation (in order, never awaited here). A subagent's turn is not the user's,
            #    and a cancelled one is not complete: their messages are archived (on_message) but
            #    no provider stores them as a turn (a cancelled one gets on_turn_cancelled).
            session, snapshot = self.session, list(self.history)
            later = self.host.hooks.later
            if session.agent_context == "primary":
                if result.cancelled:
                    later.on_turn_cancelled(user_message=user, session=session,
                                            messages=snapshot, backlog=self.worker)
                elif result.assistant is not user:
                    later.sync_turn(user_message=user, assistant_message=result.assistant,
                                    session=session, messages=snapshot, backlog=self.worker)
                    later.queue_prefetch(query=text, session=session, backlog=self.worker)
            # 7. The plugins' turn end (the memory review), notices and problems.
            return self._finish(result, budget, token, started)

    def _store_user(self, text: str, message_id: str | None) -> Message:
        """Append the user message to the history and archive it (on_message); when a store
        refuses it, take it back and raise :class:`NotStored` (the model is not called)."""
        user = Message("user", text, meta={"message_id": message_id} if message_id else {})
        self.history.append(user)
        refused = next((o for o in self._emit(user) if isinstance(o.error, NotStored)), None)
        if refused is not None:  # its store never saw it: the turn must not be answered
            self.history.pop()
            self.turns -= 1
            raise NotStored(f"plugin {refused.plugin} could not store the message: "
                            f"{refused.error} The turn was not run (the model was not "
                            "called); send the message again")
        return user

    def _run_tools(self, calls: list[ToolCall], budget: IterationBudget,
                   turn: TurnContext) -> list[ToolOutcome]:
        """Route the model's tool calls to their plugins and append their results; the budget's
        note and the plugins' (the skill nudge) ride on the batch's last result (never in the
        system prompt)."""
        if budget.exhausted:
            outcomes = [self._refused(call) for call in calls]
        else:
            outcomes = self.router.run(calls, self.session, turn)
        note = budget.note()
        notes = [*([note] if note else []), *self.host.hooks.tool_batch_note(agent=self, calls=calls)]
        if notes:
            outcomes[-1].content = "\n\n".join([outcomes[-1].content, *notes])
        for outcome in outcomes:
            message = Message("tool", outcome.content, tool_call_id=outcome.call.id,
                              tool_name=outcome.call.name,
                              meta={"is_error": True} if outcome.is_error else {})
            self.history.append(message)
            self._emit(message)
        return outcomes

    def _finish(self, result: TurnResult, budget: IterationBudget, token: CancelToken,
                started: float) -> TurnResult:
        """Fill in the turn's result; the plugins' ``on_turn_end`` may queue background work
        (a memory review that is due) and add notices."""
        result.reply = result.assistant.content if result.assistant is not result.user else ""
        if result.cancelled and not result.reply.strip():
            result.reply = f"(The turn was cancelled: {token.reason or 'cancelled'}.)"
        elif result.budget_exhausted and not result.reply.strip():
            result.reply = (f"(The turn stopped: all {budget.limit} model calls of its "
                            "budget were used before a final answer.)")
        result.session_id = self.session.id
        result.iterations = budget.used
        self.host.hooks.on_turn_end(agent=self, result=result)
        result.problems = self.take_problems()
        # A store that could not record a message must be seen, not just logged.
        result.notices += [f"a memory provider could not store this conversation: {p.message}"
                           for p in result.problems if p.status == "error"
                           and p.hook in _WRITE_HOOKS]
        result.seconds = time.perf_counter() - started
        return result

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """Cancel the running turn (from another thread): it stops before its next model call,
        and the children it delegated to stop with it. False when no turn is running."""
        token = self._cancel
        if token is None:
            return False
        token.cancel(reason)
        return True

    def subagent(self, host: PluginHost, *, title: str, tools: Collection[str] | None = None,
                 identity: str | None = None) -> Agent:
        """A child agent for a delegated task, on ``host`` (a :meth:`PluginHost.child_host`: its
        own context engine instance, the same memory providers): a new session whose
        ``parent_session_id`` is this agent's session and whose ``agent_context`` is
        ``"subagent"``, one level deeper, with the same model client."""
        attributes: dict[str, Any] = {"agent_context": "subagent", "delegation_depth": self.depth + 1}
        if self.session.user_id is not None:
            attributes["user_id"] = self.session.user_id
        session = Session(id=new_session_id(), platform=self.session.platform,
                          model=self.session.model, title=title,
                          parent_session_id=self.session.id, attributes=attributes)
        return Agent(host, self.llm, session=session, tools=tools, identity=identity,
                     depth=self.depth + 1)

    def _call_llm(self, user: Message, block: str, scrubber: StreamScrubber,
                  on_text: Callable[[str], None] | None, result: TurnResult) -> LLMResponse:
        """One model call with the API copy of the turn's user message (recall appended)."""
        messages = list(self.history)
        current = self._current_user_index(user)
        if block:
            original = messages[current]
            messages[current] = dataclasses.replace(original, content=f"{original.content}\n\n{block}")
        stream: Callable[[str], None] | None = None
        if on_text is not None:
            sink = on_text
            # text of an earlier tool-loop iteration was shown: separate this call's text from it
            pending_break = [result.streamed_chars > 0]

            def stream(delta: str) -> None:
                shown = scrubber.feed(delta)
                if shown:
                    if pending_break[0]:
                        pending_break[0] = False
                        sink("\n\n")
                    result.streamed_chars += len(shown)
                    sink(shown)

        result.system_prompts.append(self.system_prompt)
        response = self.llm.respond(
            system=self.system_prompt, messages=messages, max_tokens=self.max_tokens,
            tools=self.tool_schemas or None, on_text=stream,
        )
        if on_text is not None:
            tail = scrubber.flush()
            if tail:
                result.streamed_chars += len(tail)
                on_text(tail)
        result.usage.append(response.usage)
        return response

    def _current_user_index(self, user: Message) -> int:
        """Where this turn's user message sits in the history (a compaction may have replaced it)."""
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index] is user:
                return index
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index].role == "user":
                return index  # the engine rewrote it (e.g. merged a summary into it)
        log.warning("the context engine dropped the current user message; it was put back")
        self.history.append(user)
        return len(self.history) - 1

    def _refused(self, call: Any) -> ToolOutcome:
        return ToolOutcome(call, None, "Error: not run: this turn's model-call budget is spent.",
                           is_error=True)

    # ------------------------------------------------------------------------------ compaction

    def _maybe_compact(self, result: TurnResult) -> None:
        if len(result.compactions) >= MAX_COMPACTIONS_PER_TURN:
            return
        decision = self.host.hooks.should_compress(session=self.session, messages=self.history,
                                                   prompt_tokens=self.last_prompt_tokens)
        if decision:
            record = self._compact(None, "auto")
            if record is not None:
                result.compactions.append(record)

    def compact(self, focus_topic: str | None = None) -> CompactionRecord | None:
        """Compact now (``/compress [focus]``); ``None`` when the engine made no change."""
        with self._lock:
            self.start()
            return self._compact(focus_topic, "manual")

    def _compact(
        self, focus_topic: str | None, trigger: Literal["auto", "manual", "hygiene"]
    ) -> CompactionRecord | None:
        """pre_compaction_flush -> on_pre_compress -> compress -> on_post_compress -> child
        session -> on_session_switch (queued) -> new prompt."""
        started = time.perf_counter()
        before = list(self.history)
        # The model saves what the summary could lose; the exchange never joins the history.
        flush = self.host.hooks.pre_compaction_flush(agent=self, messages=before)
        done = engine_pass(self.host, self.session, before, focus_topic, flush)
        return None if done is None else self._continue_in_child(before, done, trigger, started)

    def _continue_in_child(self, before: list[Message], done: EnginePass,
                           trigger: Literal["auto", "manual", "hygiene", "server"],
                           started: float) -> CompactionRecord:
        """The conversation goes on in a child session holding ``done.after``: on_session_switch
        (queued), the messages archived there, the prompt rebuilt; returns the record."""
        old, after = self.session, done.after
        old_tokens = estimate_tokens(before, self.system_prompt, self.tool_schemas)
        self.session = Session(
            id=new_session_id(), platform=old.platform, model=old.model, title=old.title,
            parent_session_id=old.id, attributes=dict(old.attributes),
        )
        self._session_ids.add(self.session.id)
        self.history = after
        self.last_prompt_tokens = None
        self.host.hooks.later.on_session_switch(new_session=self.session, old_session=old,
                                                reason=SwitchReason.COMPRESSION, backlog=self.worker)
        # The child session's history starts with the compacted messages; messages carried over
        # unchanged are marked so an archive can tell them from new ones.
        kept = {id(m) for m in before}
        for message in after:
            if id(message) in kept:
                message = dataclasses.replace(message, meta={**message.meta, "carried_over": old.id})
            self._emit(message)
        self._assemble()  # the one rebuild of the system prompt a compaction allows
        return CompactionRecord(
            trigger=trigger, old_session_id=old.id, new_session_id=self.session.id,
            messages_before=len(before), messages_after=len(after), tokens_before=old_tokens,
            tokens_after=estimate_tokens(after, self.system_prompt, self.tool_schemas),
            engine=done.engine, summary=done.summary, notices=done.notices,
            memory_context=done.memory_context, flush=done.flush, carried_note=done.carried_note,
            engine_report=done.report, seconds=time.perf_counter() - started)

    def _server_compaction(self, user: Message, block: dict[str, Any]) -> CompactionRecord:
        """The model platform compacted the history: the child session holds this turn's request."""
        started, before = time.perf_counter(), list(self.history)
        done = server_pass(self.history[self._current_user_index(user)], block)
        return self._continue_in_child(before, done, "server", started)

    def _hygiene(self) -> CompactionRecord | None:
        """Compact a resumed history above :data:`~._compacting.HYGIENE_RATIO` of the window
        (once per agent)."""
        if not self._hygiene_due:
            return None
        self._hygiene_due = False
        tokens = self.last_prompt_tokens or estimate_tokens(self.history, self.system_prompt,
                                                            self.tool_schemas)
        if not over_hygiene_line(self.host, self.llm, self.session, tokens):
            return None
        return self._compact(None, "hygiene")

    # ------------------------------------------------------------------------- session changes

    def new_session(self, reason: SwitchReason = SwitchReason.NEW) -> Session:
        """End the current session (``/new``) and start a fresh one; returns it."""
        with self._lock:
            self.start()
            old, snapshot = self.session, list(self.history)
            self.host.hooks.later.on_session_end(session=old, messages=snapshot,
                                                 reason=EndReason.NEW_SESSION, backlog=self.worker)
            self.session = Session(id=new_session_id(), platform=old.platform, model=old.model,
                                   attributes=dict(old.attributes))
            self._session_ids.add(self.session.id)
            self.history = []
            self.last_prompt_tokens = None
            self._prefetch.forget()
            self.host.hooks.on_agent_reset(agent=self)
            self.host.hooks.later.on_session_switch(new_session=self.session, old_session=old,
                                                    reason=reason, backlog=self.worker)
            self._assemble()
            return self.session

    def close(self, reason: EndReason = EndReason.USER_EXIT, *, shutdown_host: bool = True) -> DrainReport:
        """End the session (on_session_end), drain what is queued within its bound, shut plugins
        down."""
        return self._end(reason, shutdown_host)

    def discard(self) -> DrainReport:
        """Drop this agent without ending its session: its history and prompt are stale (an
        erasure happened in the stores) and the conversation goes on in an agent rebuilt from
        the stores. No ``on_session_end`` (the stale history must reach no plugin); the worker is
        drained within its bound; the host is left running."""
        return self._end(None, False)

    def _end(self, reason: EndReason | None, shutdown_host: bool) -> DrainReport:
        with self._lock:
            if self._closed:
                return DrainReport("idle")
            self._closed = True
            if self._started and reason is not None:
                session, snapshot = self.session, list(self.history)
                self.host.hooks.later.on_session_end(session=session, messages=snapshot,
                                                     reason=reason, backlog=self.worker)
            self.host.hooks.on_agent_close(agent=self)  # background work gets its own bound
            report = self.worker.drain()
            self._prefetch.close()
            if shutdown_host:
                # late plugin calls still on their lanes share what is left of the drain bound
                left = max(0.0, self.worker.drain_timeout - report.seconds)
                report.abandoned.extend(self.host.shutdown(drain_timeout=left))
            self._unsubscribe()
            return report

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------- plumbing

    def _emit(self, message: Message) -> list[HookOutcome]:
        return self.host.hooks.on_message(message=message, session=self.session)


