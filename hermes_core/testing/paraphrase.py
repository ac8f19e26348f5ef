"""A paraphrase recall check for memory providers: a fact stated in one session is recalled in a
later one by a question that shares no content word with it.

The memory conformance suite can call :func:`check_paraphrase_recall` for a provider that
declares it supports recall by meaning (a provider matching words only declares it does not, and
the check is skipped). Recall goes through ``prefetch``, or through a tool the provider offers
(``tool="session_search"``), whichever the provider uses to recall.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..hooks import Hooks, values
from ..types import EndReason, Message, Session, SwitchReason, ToolContext

__all__ = ["PARAPHRASE_CASES", "check_paraphrase_recall"]

#: (the statement, a question sharing no content word with it, a word the recall must contain)
PARAPHRASE_CASES: tuple[tuple[str, str, str], ...] = (
    ("We adopted a three-year-old whippet called Pepper from the shelter last week.",
     "What kind of animal did we bring home recently?", "whippet"),
    ("I react badly to cashews and pistachios, so I always check menus carefully.",
     "Which foods give me an allergic reaction?", "cashews"),
    ("Gave up cycling to the office; the train is my way in now.",
     "How do I commute to work these days?", "train"),
)

_DISTRACTORS = (
    "The weather was grey and wet all weekend.",
    "Remind me to renew the car insurance before March.",
    "The quarterly report needs two more charts.",
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_paraphrase_recall(
    hooks: Hooks, *, settle: Callable[[], None] = lambda: None, tool: str | None = None,
    cases: tuple[tuple[str, str, str], ...] = PARAPHRASE_CASES,
) -> None:
    """State each case's fact in its own session (among distractor sessions), then ask its
    question from a new session; assert the recall (``prefetch``, or ``tool``'s result) holds
    the expected word. ``hooks`` is the kernel's facade with the provider registered (the
    conformance suite's ``hooks`` fixture); ``settle``
    waits until the provider's background work is done (for example a vector indexer)."""
    statements = [(s, "paraphrase-fact-" + str(i)) for i, (s, _q, _w) in enumerate(cases)]
    statements += [(d, "paraphrase-other-" + str(i)) for i, d in enumerate(_DISTRACTORS)]
    previous: Session | None = None
    for text, sid in statements:
        session = Session(id=sid, platform="test")
        hooks.on_session_switch(new_session=session, old_session=previous,
                                  reason=SwitchReason.NEW)
        user, assistant = Message("user", text), Message("assistant", "Noted.")
        hooks.on_message(message=user, session=session)
        hooks.on_message(message=assistant, session=session)
        hooks.sync_turn(user_message=user, assistant_message=assistant, session=session,
                          messages=[user, assistant])
        hooks.on_session_end(session=session, messages=[user, assistant],
                               reason=EndReason.USER_EXIT)
        previous = session
    settle()
    asking = Session(id="paraphrase-question", platform="test")
    hooks.on_session_switch(new_session=asking, old_session=previous, reason=SwitchReason.NEW)
    missed = []
    for _statement, question, expect in cases:
        if tool is None:
            hooks.queue_prefetch(query=question, session=asking)
            settle()
            recalled = "\n".join(values(hooks.prefetch(query=question, session=asking)))
        else:
            tools = [t for batch in values(hooks.get_tools()) for t in batch if t.name == tool]
            assert tools, f"the provider offers no tool named {tool!r}"
            recalled = _text(tools[0].invoke({"query": question}, ToolContext(session=asking)))
        if expect.lower() not in recalled.lower():
            missed.append(f"{question!r} did not recall {expect!r}")
    assert not missed, "; ".join(missed)
