"""Derived memory at write time: the auxiliary model reads each settled turn and writes facts.

With ``session_archive.derive: true`` the archive asks the auxiliary model client
(``PluginContext.llm("auxiliary")``) about every settled turn (a user message and the reply that
ends it: an assistant message calling no tool), on the provider's own background lane
(``PluginContext.run_later``), never on the turn's path: the turn only queues a wake-up, and
each derivation waits until turns have paused (``hermes_core.embeddings.wait_for_pause``). The
model answers with JSON, validated strictly by :func:`parse_facts`; what passes is stored by
facts.py with its links, validity and (when an embedder is active) a vector.

The model sees the turn's messages with their ids and the user's newest current facts with
theirs, so a fact that updates an earlier one can name it in ``supersedes``. What it may say::

    {"facts": [{"kind": "preference" | "decision" | "state",
                "topic": "a short slot name, e.g. team location",
                "text": "one self-contained sentence about the user",
                "valid_from": "YYYY-MM-DD" or null,
                "sources": [ids of the turn's messages it was read from],
                "supersedes": [ids of the current facts it updates]}]}

Bad output never reaches the store: an answer that is not that JSON is refused whole; a fact
citing a message outside the turn (a made-up id, another session's or another user's message),
superseding a fact it was not shown, with a bad date or a missing field is dropped; two facts of
one answer on the same topic contradict each other and both are dropped. Each refusal is noted
(``facts_error``, shown by ``doctor``). A failing or slow model (each call has
``derive_timeout``) leaves the cursor where it was: the turn is tried again at the next wake-up;
a request the model refuses as malformed (400) or an empty answer skips the turn.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hermes_core.embeddings import wait_for_pause
from hermes_core.llm import LLMError, LLMFailure
from hermes_core.storage import vectors as stored_vectors
from hermes_core.types import Message

from .facts import Fact, NewFact, Turn, _day, facts_of, pending_turns, record_error, save_turn
from .store import SessionArchive

__all__ = ["KINDS", "SYSTEM_PROMPT", "Deriver", "build_prompt", "parse_facts"]

log = logging.getLogger("hermes_core.plugins.session_archive")

KINDS = ("preference", "decision", "state")
MAX_FACTS = 12
TEXT_CHARS = 400
TOPIC_CHARS = 60
_KEYS = {"kind", "topic", "text", "valid_from", "sources", "supersedes"}
_REQUIRED = {"kind", "topic", "text", "sources"}
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.S)

SYSTEM_PROMPT = """You extract durable facts about the user from one turn of a conversation.
Write only facts a later conversation could need: preferences (also ones stated indirectly, such
as "I can't handle spicy food"), decisions, and states that change (where they live or work,
what they use, who they work with). Each fact is one self-contained sentence about the user,
dated when the turn says when it became true. Skip small talk, questions, and anything the
assistant said that the user did not confirm. One fact per topic. When a fact updates one of the
current facts listed, put that fact's id in "supersedes".
Answer with JSON only, no prose:
{"facts": [{"kind": "preference|decision|state", "topic": "short slot name",
"text": "sentence", "valid_from": "YYYY-MM-DD or null", "sources": [message ids],
"supersedes": [fact ids]}]}
Answer {"facts": []} when the turn holds no such fact."""


def build_prompt(turn: Turn, current: list[Fact]) -> str:
    """The user message of one derivation call: the current facts, then the turn."""
    lines = [f"Date of the turn: {_day(turn.messages[-1][3])}", "", "Current facts:"]
    lines += [f"[fact {f.id}] ({f.topic}, since {_day(f.valid_from)}) {f.text}"
              for f in current] or ["(none)"]
    lines += ["", "The turn:"]
    lines += [f"[{mid}] {role}: {text}" for mid, role, text, _ts in turn.messages]
    return "\n".join(lines)


def _date(value: Any) -> float | None:
    if not isinstance(value, str):
        raise ValueError("valid_from must be a date written YYYY-MM-DD or null")
    try:
        day = datetime.strptime(value.strip()[:10], "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"valid_from {value[:30]!r} is not a date written YYYY-MM-DD") from None
    return day.timestamp()


def _ids(value: Any, name: str) -> list[int]:
    if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name} must be a list of integer ids")
    return [int(v) for v in value]


def _one(item: Any, turn_ids: set[int], known: set[int], turn_time: float) -> NewFact:
    if not isinstance(item, dict):
        raise ValueError("a fact must be a JSON object")
    extra, missing = set(item) - _KEYS, _REQUIRED - set(item)
    if extra or missing:
        raise ValueError(f"unexpected keys {sorted(extra)}" if extra else
                         f"missing keys {sorted(missing)}")
    kind, topic, text = item["kind"], item["topic"], item["text"]
    if kind not in KINDS:
        raise ValueError(f"kind {str(kind)[:30]!r} is not one of {', '.join(KINDS)}")
    for name, value, cap in (("topic", topic, TOPIC_CHARS), ("text", text, TEXT_CHARS)):
        if not isinstance(value, str) or not value.strip() or len(value) > cap:
            raise ValueError(f"{name} must be a non-empty string of at most {cap} characters")
    sources = _ids(item["sources"], "sources")
    if not sources:
        raise ValueError("sources is empty: a fact must name the messages it was read from")
    foreign = sorted(set(sources) - turn_ids)
    if foreign:
        raise ValueError(f"sources {foreign} are not messages of this turn")
    supersedes = _ids(item.get("supersedes", []), "supersedes")
    unknown = sorted(set(supersedes) - known)
    if unknown:
        raise ValueError(f"supersedes {unknown}, which are not current facts shown to the model")
    raw = item.get("valid_from")
    valid_from = turn_time if raw is None else _date(raw)
    assert valid_from is not None
    return NewFact(kind=kind, topic=" ".join(topic.split()).casefold(), text=" ".join(text.split()),
                   valid_from=min(valid_from, turn_time), sources=sources,
                   supersedes=sorted(set(supersedes)))


def parse_facts(text: str, turn: Turn, known: set[int]) -> tuple[list[NewFact], list[str]]:
    """The facts of a model's answer that pass every check, and what was refused (why).

    ``known``: the ids of the current facts the model was shown (the only ones it may supersede).
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        return [], [f"the answer is not JSON: {text[:80]!r}"]
    if not isinstance(data, dict) or set(data) != {"facts"} or not isinstance(data["facts"], list):
        return [], ['the answer is not an object {"facts": [...]}']
    if len(data["facts"]) > MAX_FACTS:
        return [], [f"the answer holds {len(data['facts'])} facts (at most {MAX_FACTS})"]
    turn_ids = {m[0] for m in turn.messages}
    turn_time = turn.messages[-1][3] if turn.messages else 0.0
    good: list[NewFact] = []
    problems: list[str] = []
    for i, item in enumerate(data["facts"]):
        try:
            good.append(_one(item, turn_ids, known, turn_time))
        except ValueError as exc:
            problems.append(f"fact {i + 1} refused: {exc}")
    topics: dict[str, int] = {}
    for fact in good:
        topics[fact.topic] = topics.get(fact.topic, 0) + 1
    clash = sorted(t for t, n in topics.items() if n > 1)
    if clash:
        problems.append(f"contradictory facts on {', '.join(repr(t) for t in clash)} in one "
                        "answer: none of them is stored")
        good = [f for f in good if f.topic not in clash]
    return good, problems


class Deriver:
    """The derivation lane of one provider: :meth:`wake` after a turn settles queues one run on
    the provider's background lane (``run_later``); a run works through every pending turn."""

    def __init__(self, archive: Callable[[], SessionArchive], client: Any,
                 run_later: Callable[[Callable[[], None], str], bool], *,
                 embedder: Callable[[], Any] = lambda: None, timeout: float = 60.0,
                 max_tokens: int = 1024, context_facts: int = 30, erasures: Any = None) -> None:
        self._archive = archive
        #: the erasure log (hermes_core.storage.erasure_log): a forget noted while a turn is
        #: derived is applied to the facts stored for it (the model read what it erased)
        self._erasures = erasures
        self.client = client
        self._run_later = run_later
        self._embedder = embedder
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.context_facts = context_facts
        self._lock = threading.Lock()
        self._queued = False
        self._again = False
        self._stop = threading.Event()
        #: set while no run is queued or running
        self.idle = threading.Event()
        self.idle.set()
        #: the last problem of this process's runs (also kept in the archive for doctor)
        self.error: str | None = None

    def wake(self) -> None:
        """Queue a run (one at most: a run already queued picks the new turn up)."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._queued:
                self._again = True
                return
            self._queued, self._again = True, False
            self.idle.clear()
        if not self._run_later(self._run, "derive facts from settled turns"):
            with self._lock:
                self._queued = False
                self.idle.set()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no run is queued or running (False after ``timeout`` seconds)."""
        return self.idle.wait(timeout)

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    self._again = False
                self.drain()
                with self._lock:
                    if not self._again or self._stop.is_set():
                        self._queued = False
                        self.idle.set()
                        return
        except BaseException:
            with self._lock:
                self._queued = False
                self.idle.set()
            raise

    def drain(self) -> int:
        """Derive every pending turn; how many were done. Stops at a failing model (the turn is
        tried again at the next wake-up) or when closed."""
        done = 0
        while not self._stop.is_set():
            archive = self._archive()
            mark = self._mark()  # before the turns and the facts shown with them are read
            through, turns = pending_turns(archive)
            if not turns:
                return done
            for turn in turns:
                if self._stop.is_set():
                    return done
                outcome = self._one(archive, turn, through, mark)
                if outcome is None:
                    return done
                if not outcome:
                    break  # another process moved the cursor: read it again
                through = turn.end
                done += 1
        return done

    def _mark(self) -> int | None:
        """The erasure log's settled mark now (None: no log, or it cannot be read)."""
        if self._erasures is None:
            return None
        try:
            return int(self._erasures.settled())
        except Exception as exc:
            log.error("derived memory: cannot read the erasure log (%s): a forget landing while "
                      "a turn is derived may leave a fact mentioning its subject", exc)
            return None

    def _forget_late(self, archive: SessionArchive, turn: Turn, mark: int | None,
                     facts: list[NewFact]) -> None:
        """Forgets noted after ``mark`` (while the model read the turn and the user's facts,
        which they may have erased): applied again to what was just stored for the turn."""
        if mark is None or not facts:
            return
        try:
            notes = self._erasures.since(mark)
        except Exception as exc:
            log.error("derived memory: cannot read the erasure log (%s)", exc)
            return
        texts = [f.text for f in facts] + [f.topic for f in facts]
        for note in notes:
            if note.what != "forget" or (note.scope.startswith("user:")
                                         and note.scope[5:] != (turn.user_id or "")):
                continue
            subject = note.find_in(*texts)
            if subject is not None:
                from .forget import forget_messages

                found = forget_messages(archive, subject, scope=note.scope)
                log.info("derived memory: a fact of the turn ending at message %s mentioned a "
                         "subject forgotten meanwhile; forgotten again (%d item(s))", turn.end,
                         found.deleted)

    def _one(self, archive: SessionArchive, turn: Turn, through: int,
             mark: int | None = None) -> bool | None:
        """Derive one turn: True once stored, False when another process did it first, None
        when the model failed (nothing written but the error)."""
        wait_for_pause()  # turns first: a derivation never shares the CPU with one for long
        current = facts_of(archive, turn.user_id, limit=self.context_facts)
        prompt = build_prompt(turn, current)
        problem: str | None = None
        facts: list[NewFact] = []
        usage_in = usage_out = 0
        try:
            response = self.client.respond(system=SYSTEM_PROMPT,
                                           messages=[Message(role="user", content=prompt)],
                                           max_tokens=self.max_tokens, timeout=self.timeout)
        except LLMError as exc:
            if exc.failure not in (LLMFailure.BAD_REQUEST, LLMFailure.EMPTY):
                self._failed(archive, f"the model failed ({exc.failure.value}): {exc}; the turn "
                             f"ending at message {turn.end} is tried again at the next turn")
                return None
            problem = f"the model refused the request ({exc.failure.value}): {exc}"
        except Exception as exc:  # a broken client must not stop the lane for good
            self._failed(archive, f"the model client raised {type(exc).__name__}: {exc}")
            return None
        else:
            usage_in = int(response.usage.input_tokens or 0)
            usage_out = int(response.usage.output_tokens or 0)
            facts, problems = parse_facts(response.text, turn, {f.id for f in current})
            problem = "; ".join(problems) or None
            self._embed(facts)
        try:
            stored = save_turn(archive, turn, through, facts, model=getattr(self.client, "model",
                                                                             None),
                               input_tokens=usage_in, output_tokens=usage_out, problem=problem)
        except Exception as exc:  # the database is unreachable: try again later
            self.error = f"facts could not be stored: {type(exc).__name__}: {exc}"
            log.warning("derived memory paused: %s", self.error)
            return None
        if stored:
            self._forget_late(archive, turn, mark, facts)
        self.error = problem
        if problem:
            log.warning("derived memory: turn ending at message %s: %s", turn.end, problem)
        return stored

    def _failed(self, archive: SessionArchive, problem: str) -> None:
        self.error = problem
        log.warning("derived memory paused: %s", problem)
        try:
            record_error(archive, problem)
        except Exception as exc:
            log.debug("derived memory: the error could not be recorded: %s", exc)

    def _embed(self, facts: list[NewFact]) -> None:
        """Vectors for the facts when an embedder is active; without one (or when it fails)
        the facts are stored without, and found by their words."""
        if not facts:
            return
        embedder = self._embedder()
        if embedder is None:
            return
        try:
            blobs = stored_vectors.embed_encoded(embedder, [f.text for f in facts])
        except Exception as exc:  # a failing embedder, or NaN / a wrong size
            log.info("derived memory: facts stored without vectors (%s)", exc)
            return
        for fact, blob in zip(facts, blobs, strict=True):
            fact.vec = blob
