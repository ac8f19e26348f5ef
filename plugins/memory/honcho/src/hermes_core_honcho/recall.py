"""What ``prefetch`` serves: the recall prepared in the background, per session, with its cadence.

Two layers are prepared after a turn (``queue_prefetch``), on the provider's disposable lane:

* the **base context**: the session summary, Honcho's representation of the user (its conclusions,
  ranked by the turn's message) and the user's peer card, in one ``GET .../context`` request;
* the **dialectic answer**: the answer of the agent's peer to the turn's message about the user
  (``POST .../peers/{ai}/chat``), which is what brings back things said in earlier sessions.

Each layer runs every ``context_cadence`` / ``dialectic_cadence`` turns. A layer that comes back
empty doubles its interval (up to ``max_backoff`` times the cadence): a new user has nothing to
recall yet, and asking every turn would only cost requests. Any non-empty answer resets it.
Trivial messages ("ok", "thanks", slash commands) start no work at all.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

__all__ = ["Layer", "RecallState", "base_text", "is_trivial", "render"]

_TRIVIAL = frozenset({
    "ok", "okay", "k", "kk", "thanks", "thank", "thx", "ty", "cheers", "yes", "yep", "yeah", "no",
    "nope", "sure", "cool", "great", "nice", "good", "fine", "hi", "hello", "hey", "bye", "lol", "np",
    "done"
}) | {"thank you", "got it", "sounds good", "go on", "go ahead", "all right", "alright",
     "ok thanks", "okay thanks", "thanks a lot", "no thanks", "yes please"}
_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)


def is_trivial(text: str) -> bool:
    """True for messages that need no recall: empty, a slash command, an acknowledgement."""
    stripped = text.strip()
    if not stripped or stripped.startswith("/"):
        return True
    words = " ".join(_PUNCT.sub(" ", stripped.lower()).split())
    return not words or words in _TRIVIAL or (len(words) <= 3 and " " not in words)


@dataclass
class Layer:
    """One layer's last answer and its cadence bookkeeping."""

    cadence: int
    max_backoff: int
    text: str = ""
    backoff: int = 1
    last_turn: int | None = None
    answered: bool = False  #: a refresh of this layer has finished (even with an empty answer)

    def due(self, turn: int) -> bool:
        if self.cadence <= 0:
            return False
        return self.last_turn is None or turn - self.last_turn >= self.cadence * self.backoff

    def record(self, turn: int, text: str) -> None:
        self.last_turn = turn
        self.text = text
        self.answered = True
        self.backoff = 1 if text else min(self.backoff * 2, self.max_backoff)


@dataclass
class RecallState:
    """The recall of one Honcho session."""

    base: Layer
    dialectic: Layer
    turn: int = 0  #: non-trivial turns seen by queue_prefetch (and the first prefetch)
    query: str = ""  #: the message the current answers were prepared for
    ready: threading.Event = field(default_factory=threading.Event)

    def inherit(self, parent: RecallState) -> None:
        """A compaction continues the conversation: start from the parent's answers."""
        for mine, theirs in ((self.base, parent.base), (self.dialectic, parent.dialectic)):
            mine.text, mine.backoff, mine.answered = theirs.text, theirs.backoff, theirs.answered
        self.query = parent.query
        if parent.ready.is_set():
            self.ready.set()


def render(state: RecallState, *, user: str, ai: str, limit: int) -> str:
    """The text ``prefetch`` returns: the base context, then the dialectic answer; ``""`` if none."""
    parts = [p for p in (state.base.text, state.dialectic.text and
                         f"## {ai}'s recall about {user} for this message\n{state.dialectic.text}") if p]
    text = "\n\n".join(parts)
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def base_text(*, summary: str | None, representation: str | None, card: list[str] | None,
              user: str, ai: str) -> str:
    """The base context's sections, each only when it has content."""
    sections = []
    if summary and summary.strip():
        sections.append(f"## Summary of this conversation so far\n{summary.strip()}")
    if representation and representation.strip():
        sections.append(f"## What {ai} knows about {user}\n{representation.strip()}")
    if card:
        facts = "\n".join(f"- {fact}" for fact in card if fact.strip())
        if facts:
            sections.append(f"## {user}'s profile\n{facts}")
    return "\n\n".join(sections)
