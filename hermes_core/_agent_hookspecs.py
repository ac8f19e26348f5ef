"""The agent's own points in a conversation, as hooks (part of :mod:`hermes_core.hookspecs`).

Implemented by plugin modules (the built-in ``memory_review`` implements all six: the background
memory review, the pre-compaction flush and the skill nudge take part in a conversation through
them). Like every hook on the turn's path, each implementation runs on its plugin's lane for the
conversation under the hook's deadline (``hooks.timeouts``; see ``DEFAULT_HOOK_TIMEOUTS``; the
built-in ``memory_review``'s own bookkeeping and close excepted, which run on the agent's thread, see
``loader.inline``): one that is late is recorded as a problem of the turn, the agent goes
on without it, and its answer, when it comes, is dropped; until it answers in time again the
plugin is only probed. Keep an implementation short and queue slow work with :meth:`PluginHost.run_later
<hermes_core.host.PluginHost.run_later>`. An implementation that raises is recorded as a problem
of the turn and the agent goes on. ``agent`` is the :class:`~hermes_core.agent.Agent` (its
``host``, ``session``, ``history``, ``router``, ``system_prompt``, ``aux_llm``, ``on_notice``):
do not change what the kernel reads (a late implementation may still be running when the agent
has moved on); a plugin keeps its per-conversation state itself, on the agent under a name of
its own (``setattr(agent, "my_plugin_state", ...)``) so that it goes with the agent. A
module-level ``weakref.WeakKeyDictionary`` keyed by the agent whose values hold the host keeps
the host alive until a garbage collection has removed the agent's entry, and frees it only at the
next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._markers import hookspec

if TYPE_CHECKING:
    from .agent import Agent
    from .results import CurationReport, TurnEndNote, TurnResult
    from .types import Message, ToolCall

__all__ = ["on_agent_close", "on_agent_reset", "on_turn_begin", "on_turn_end",
           "pre_compaction_flush", "tool_batch_note"]


@hookspec
def on_turn_begin(agent: Agent) -> None:
    """A user turn starts: called once per :meth:`Agent.run_turn <hermes_core.agent.Agent.run_turn>`
    (a retried turn whose stored reply is returned excepted), after the pre-turn hygiene
    compaction and before the user message is stored. Count turns here; the answer is ignored.
    """


@hookspec
def tool_batch_note(agent: Agent, calls: list[ToolCall]) -> str | None:
    """A batch of the model's tool ``calls`` has run: return a note for the model, or ``None``.

    Every implementation is called; the notes (after the iteration budget's own) are appended,
    in call order, to the batch's last tool result, so the model reads them with the results and
    the system prompt never changes. Something other than text is recorded and ignored.
    """


@hookspec(firstresult=True)
def pre_compaction_flush(agent: Agent, messages: list[Message]) -> CurationReport | None:
    """A compaction of ``messages`` (the history as it is) is about to start: the last chance to
    save what the summary could lose.

    Called before ``on_pre_compress``, on automatic, manual (``/compress``) and hygiene
    compactions. An implementation may call the session's tools (through a
    :class:`~hermes_core.toolrun.ToolRouter`) with the auxiliary model (``agent.aux_llm``, else
    ``agent.host.llm("auxiliary")``); whatever it sends or receives is its own: it never joins the
    history, the archive or any hook's messages. Return a
    :class:`~hermes_core.results.CurationReport` (it becomes the compaction record's ``flush``) or
    ``None``; the first report wins. The compaction goes on whatever happens here.
    """


@hookspec
def on_turn_end(agent: Agent, result: TurnResult) -> TurnEndNote | None:
    """A turn has its reply (``result``, not yet returned to the caller; read it, do not change
    it): every implementation may queue background work and return what it adds to the result.

    Return a :class:`~hermes_core.results.TurnEndNote` (or ``None``): its ``notices`` (what the
    user should read) are appended to ``result.notices`` in call order, and ``review_started``
    (work was queued that the caller may want to know of: the memory review) sets
    ``result.review_started``. The kernel merges the notes that came within the deadline; a late
    one's is dropped. Background work goes on the plugin's lanes (:meth:`PluginHost.run_later
    <hermes_core.host.PluginHost.run_later>`), never delaying the reply; a notice it produces
    later goes to ``agent.on_notice`` (when set). Called after a cancelled turn and a delegated
    child's too (``result.cancelled``, ``agent.session.agent_context``).
    """


@hookspec
def on_agent_reset(agent: Agent) -> None:
    """The conversation starts over in a new session (``/new``, :meth:`Agent.new_session
    <hermes_core.agent.Agent.new_session>`), after the old session's end was queued: reset
    per-conversation counters here. Not called for a compaction's child session.
    """


@hookspec
def on_agent_close(agent: Agent) -> None:
    """The agent is closing (:meth:`Agent.close <hermes_core.agent.Agent.close>` or ``discard``),
    before its queued calls are drained and the plugins shut down: give background work of this
    conversation a bound of your own within this hook's deadline
    (``hooks.timeouts.on_agent_close``), then stop it. Called once per agent.
    """
