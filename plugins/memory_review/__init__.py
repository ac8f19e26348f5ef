"""The memory review (built-in plugin ``memory_review``): the background review of a
conversation, the pre-compaction memory flush and the skill nudge.

It takes part in each conversation through the agent's hooks, one :class:`~.curator.Curator` per
:class:`~hermes_core.agent.Agent`, kept on the agent as ``agent.curator`` (so it goes with the
agent: a module-level table keyed weakly by the agent would keep the curator, and through it the
host, until the agent's entry is removed by a garbage collection, and the host only freed by a
second one); made at the conversation's first hook, so a resumed history keeps its place in the
review cycle. Each hook runs on the plugin's lane for the
conversation under its deadline (``hooks.timeouts``), as any plugin's, except the four quick ones
(``on_turn_begin``, ``tool_batch_note``, ``on_turn_end``, ``on_agent_reset``: bookkeeping that does
no I/O and waits for nothing) and ``on_agent_close`` (its wait is bounded here, within the hook's
deadline), which the kernel runs on the agent's thread (marked with ``inline`` from
:mod:`hermes_core.loader`): keep them so.

* ``on_turn_begin``: a user turn is counted;
* ``tool_batch_note``: the skill nudge rides on a tool batch's last result;
* ``pre_compaction_flush``: the model saves what a summary could lose, with the session's memory
  tool and the auxiliary model; the exchange is dropped, its report goes on the compaction record;
* ``on_turn_end``: a review that is due is queued on the plugin's lane for the conversation;
  the returned ``TurnEndNote`` sets ``TurnResult.review_started`` and brings the notices;
* ``on_agent_reset`` (``/new``): the counters start again;
* ``on_agent_close``: a running review gets its own bound (cut to fit the hook's deadline), then
  writes nothing more.

On by default, as the review always was, even in a host loaded without the built-ins;
``plugins.disabled: [memory_review]`` turns all three off (``memory.nudge_interval: 0`` and
``memory.flush_before_compaction: false`` turn off one each), and a ``plugins.enabled_only`` list
must name it to keep it.

Other plugins reach the review through the plugin manager, never by importing it (``sessions
review`` of the session archive: ``host.pm.get_plugin("memory_review").review_session(...)``,
``None`` when the plugin is off).
Loading the plugin imports only this module: :mod:`.curator` is imported by a conversation's
first hook.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from hermes_core import hookimpl
from hermes_core.loader import inline
from hermes_core.results import TurnEndNote

if TYPE_CHECKING:
    from hermes_core.agent import Agent
    from hermes_core.host import PluginHost
    from hermes_core.llm import ChatLLM
    from hermes_core.results import CurationReport, TurnResult
    from hermes_core.types import Message, Session, ToolCall

    from .curator import CurationJob, Curator

__all__ = ["on_agent_close", "on_agent_reset", "on_turn_begin", "on_turn_end",
           "pre_compaction_flush", "review_session", "tool_batch_note"]


#: the agent attribute holding its curator (the plugin's state for the conversation)
_ATTRIBUTE = "curator"
_MAKING = threading.Lock()


def _kept(agent: Agent) -> Curator | None:
    curator: Curator | None = vars(agent).get(_ATTRIBUTE)
    return curator


def _curator(agent: Agent) -> Curator:
    """The agent's curator, made at its first hook (from the history it started with)."""
    curator = _kept(agent)
    if curator is not None:
        return curator
    with _MAKING:  # a late hook may still run on another lane: one curator per agent
        curator = _kept(agent)
        if curator is None:
            from .curator import Curator

            owner = weakref.ref(agent)  # a review still running must not keep the agent alive

            def tell(text: str) -> None:  # the agent's callback of the moment (a front end sets it)
                callback = getattr(owner(), "on_notice", None)
                if callback is not None:
                    callback(text)

            curator = Curator(agent.host, agent.aux_llm, on_notice=tell,
                              prior_user_turns=sum(1 for m in agent.history if m.role == "user"))
            setattr(agent, _ATTRIBUTE, curator)  # also read by callers and tests
    return curator


def _job(agent: Agent, messages: list[Message]) -> CurationJob | None:
    if agent.session.agent_context != "primary":
        return None  # a subagent's work is not the user's conversation: nothing to curate
    from .curator import make_job

    return make_job(agent.host, agent.router, agent.session, messages, agent.system_prompt)


@hookimpl
@inline
def on_turn_begin(agent: Agent) -> None:
    _curator(agent).begin_turn()


@hookimpl
@inline
def tool_batch_note(agent: Agent, calls: list[ToolCall]) -> str | None:
    return _curator(agent).skill_nudge(agent.router, calls)


@hookimpl
def pre_compaction_flush(agent: Agent, messages: list[Message]) -> CurationReport | None:
    return _curator(agent).flush(_job(agent, messages))


@hookimpl
@inline
def on_turn_end(agent: Agent, result: TurnResult) -> TurnEndNote | None:
    from .curator import curation_tools

    curator = _curator(agent)
    snapshot = list(agent.history)
    memory_tools = {t.name for t, _ in curation_tools(agent.router.tools, "memory")}
    started = curator.end_turn(result.tools, lambda: _job(agent, snapshot),
                               memory_tools=memory_tools)
    notices = curator.take_notices()
    return TurnEndNote(notices, started) if started or notices else None


@hookimpl
@inline
def on_agent_reset(agent: Agent) -> None:
    curator = _kept(agent)
    if curator is not None:
        curator.reset()


@hookimpl
@inline
def on_agent_close(agent: Agent) -> None:
    curator = _kept(agent)
    if curator is not None:
        # a running review gets its own bound, cut to end before this hook's deadline does
        deadline = agent.host.config.core.hooks.timeout("on_agent_close")
        curator.close(limit=max(0.0, deadline - 1.0))  # then it writes nothing more


def review_session(host: PluginHost, session: Session, messages: list[Message], *,
                   llm: ChatLLM | None = None) -> CurationReport:
    """Run a memory review now over a stored conversation (see :func:`.curator.review_session`):
    what ``hermes-core sessions review`` calls, through the plugin manager."""
    from .curator import review_session as review

    return review(host, session, messages, llm=llm)
