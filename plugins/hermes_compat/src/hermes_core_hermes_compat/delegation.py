"""Delegation as Hermes Agent 0.19.0 tells its plugins about it (the pure parts).

hermes-core's ``delegate_task`` runs each task in a child session (``Session.agent_context``
``"subagent"``, ``parent_session_id`` the delegating session) and then calls the kernel hook
``on_delegation(task, result, child_session_id, status, session)`` on the parent's providers.
Hermes 0.19.0 (``tools/delegate_tool.py``) tells a plugin three things, which the adapter
(:mod:`.adapter_memory`) delivers from the kernel's points:

* ``MemoryProvider.on_delegation(task, result, child_session_id=...)`` on the parent's provider,
  once per child, with the child's final answer (``""`` when it produced none: Hermes passes the
  child's summary, which a failed, timed-out or interrupted child does not have);
* the general hook ``subagent_start`` when a child begins (here: its first user message, the
  task as the child receives it) and ``subagent_stop`` when it is done (from ``on_delegation``),
  both with Hermes' keyword arguments (:func:`start_kwargs`, :func:`stop_kwargs`).

Hermes builds its children with ``skip_memory=True``: a child has no provider session at all.
hermes-core runs the same providers in the child; the bridge initialises a fresh Hermes object
for each child with ``agent_context="subagent"`` and the parent's id (Hermes' documented values
for a subagent), lets it recall (prefetch, system prompt block, its tools) and sends it nothing
that writes: no ``sync_turn`` (the kernel sends none), no ``on_session_end`` messages, no
``on_memory_write``.
"""

from __future__ import annotations

from typing import Any

from hermes_core.types import Session

__all__ = ["HERMES_STATUS", "child_role", "delegated_result", "start_kwargs", "stop_kwargs"]

#: the kernel's status of a finished child -> Hermes' ``child_status``
HERMES_STATUS: dict[str, str] = {
    "completed": "completed",
    "failed": "error",  # the child raised (Hermes: an exception in the child's run)
    "timed_out": "timeout",
    "budget_exhausted": "failed",  # no final answer within its iterations
    "cancelled": "interrupted",
}


def delegated_result(result: str, status: str) -> str:
    """The ``result`` Hermes passes to ``on_delegation``: the child's answer, or ``""``."""
    return result if status == "completed" else ""


def child_role(child_depth: int, max_depth: int) -> str:
    """Hermes' role of a child: ``"orchestrator"`` when it may delegate again, else ``"leaf"``."""
    return "orchestrator" if child_depth < max_depth else "leaf"


def _depth(session: Session) -> int:
    value = session.attributes.get("delegation_depth")
    return value if isinstance(value, int) else 0


def start_kwargs(child: Session, goal: str, parent_turn_id: str, parent_is_child: bool,
                 max_depth: int) -> dict[str, Any]:
    """``subagent_start``'s keyword arguments for the child session ``child``. hermes-core has no
    subagent ids of its own: a session id stands for one (``None`` for the user's agent)."""
    return {"parent_session_id": child.parent_session_id, "parent_turn_id": parent_turn_id,
            "parent_subagent_id": child.parent_session_id if parent_is_child else None,
            "child_session_id": child.id, "child_subagent_id": child.id,
            "child_role": child_role(_depth(child), max_depth), "child_goal": goal}


def stop_kwargs(parent: Session, child_session_id: str, result: str, status: str,
                parent_turn_id: str, duration_ms: int, max_depth: int) -> dict[str, Any]:
    """``subagent_stop``'s keyword arguments for one finished child of ``parent``."""
    answered = delegated_result(result, status)
    return {"parent_session_id": parent.id, "parent_turn_id": parent_turn_id,
            "child_session_id": child_session_id,
            "child_role": child_role(_depth(parent) + 1, max_depth),
            "child_summary": answered or None, "child_status": HERMES_STATUS.get(status, status),
            "duration_ms": duration_ms}
