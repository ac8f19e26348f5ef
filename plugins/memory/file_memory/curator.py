"""The curator: proposes a cleaner version of a store, as a diff with one reason per change.

Offline (deterministic, no model) it finds:

* **exact duplicates**: the same entry twice (a hand edit, a merge of two files); later copies go;
* **same text**: entries equal once case, punctuation and spacing are ignored; the later goes;
* **near duplicates**: entries whose words (minus filler words) overlap at least
  ``near_duplicate`` (Jaccard) *and* one's words are all in the other: the one that says less goes.
  Overlapping entries that each hold a word the other lacks are never dropped offline (that could
  lose a fact); they are listed as *related*, for the model to merge;
* **superseded entries**: two entries state the same kind of fact about the same subject (where
  someone lives, works, is called, their time zone, or a ``Key: value`` line with the same key);
  the earlier entry in the file is stale, the later one wins ("User lives in Berlin" then "User
  moved to Lisbon").

With a model (:func:`model_changes`, the auxiliary model through the anthropic SDK) it also merges
related entries and shortens long ones; every text it proposes is checked like a tool write (size,
separator, threat scan) and the whole proposal must fit the limit, else it is refused as a whole.

Pinned entries (``hermes-core memory pin``) are never dropped, merged or rewritten. A proposal is
only a description: :func:`apply_proposal` writes it as one version (``memory rollback`` undoes it),
and only if the store still holds exactly what the proposal was computed from.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from hermes_core.threats import scan

from .entries import entry_problem, joined_size, percent
from .errors import MemoryRefused
from .history import Provenance
from .pins import pinned_entries
from .store import MemoryStore, WriteResult

__all__ = [
    "Change",
    "CuratorError",
    "Proposal",
    "apply_proposal",
    "model_changes",
    "propose",
]


class CuratorError(MemoryRefused):
    """A proposal that cannot be made or applied; nothing was written."""


@dataclass(slots=True)
class Change:
    """One change of a proposal. ``entries`` are 1-based positions in the store as read."""

    kind: str  #: drop | merge | rewrite
    entries: list[int]
    old: list[str]
    new: str | None
    reason: str


@dataclass(slots=True)
class Proposal:
    target: str
    before: list[str]
    after: list[str]
    changes: list[Change]
    limit: int
    target_ratio: float
    #: the store's bytes the proposal was computed from (applied only if still there)
    base: bytes | None
    notes: list[str] = field(default_factory=list)
    related: list[list[int]] = field(default_factory=list)

    @property
    def size_before(self) -> int:
        return joined_size(self.before)

    @property
    def size_after(self) -> int:
        return joined_size(self.after)

    @property
    def freed(self) -> int:
        return self.size_before - self.size_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "limit": self.limit, "target_ratio": self.target_ratio,
            "size_before": self.size_before, "size_after": self.size_after,
            "freed": self.freed,
            "percent_before": percent(self.size_before, self.limit),
            "percent_after": percent(self.size_after, self.limit),
            "changes": [asdict(c) for c in self.changes], "related": self.related,
            "notes": self.notes, "before": self.before, "after": self.after,
        }


# ------------------------------------------------------------------------------ deterministic

_STOP_WORDS = ("a an the and or of to in on at for with is are was were be been has have had "
               "it its this that as by from their there they he she his her our we you your "
               "i my me")
_STOP = frozenset(_STOP_WORDS.split(" "))
_WORD = re.compile(r"\w+", re.UNICODE)

# Kinds of single-valued facts: a later statement of the same kind about the same subject
# replaces the earlier one. Each pattern's match starts at the verb; the text before it is the
# subject ("User", "User's sister", "The team").
_KINDS: list[tuple[str, str, re.Pattern[str]]] = [
    ("residence", "where {s} lives", re.compile(
        r"\b(?:lives|living|live|resides|residing|is based|based|relocated|moved|moving|"
        r"has moved)\s+(?:in|to|at|from \w+ to)\b", re.I)),
    ("employer", "where {s} works", re.compile(
        r"\b(?:works|working|worked|is employed|employed)\s+(?:at|for)\b|\bjoined\b", re.I)),
    ("name", "what {s} is called", re.compile(
        r"\b(?:name is|is called|goes by|prefers to be called)\b", re.I)),
    ("timezone", "{s}'s time zone", re.compile(r"\b(?:time ?zone is|is in time ?zone)\b", re.I)),
]
#: word overlap from which two entries are listed as related (merge candidates for the model)
RELATED = 0.5
_KEY = re.compile(r"^([A-Za-z][\w '\-/]{0,38}?):\s+\S")


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if w not in _STOP)


def _subject_key(entry: str) -> tuple[str, str, str] | None:
    """(kind, subject, description) of a single-valued fact, or ``None``."""
    first = entry.split("\n", 1)[0]
    key = _KEY.match(first)
    if key is not None:
        name = _normal(key.group(1))
        return ("key", name, f"the value of {key.group(1).strip()!r}")
    for kind, describe, pattern in _KINDS:
        found = pattern.search(first)
        if found is None:
            continue
        subject = _normal(first[:found.start()])
        return (kind, subject, describe.format(s=subject or "the user"))
    return None


def propose(store: MemoryStore, target: str, *, target_ratio: float = 0.8,
            near_duplicate: float = 0.8) -> Proposal:
    """The deterministic proposal for ``target`` (no model, no I/O beyond reading the store)."""
    state = store.read(target)
    if state.problem is not None:
        raise CuratorError(f"{state.problem}; fix or move the file before curating it",
                           target=target)
    entries = state.entries
    pins = pinned_entries(store, target)
    drop: dict[int, Change] = {}
    _drop_same_text(entries, pins, drop)
    related = _drop_near_duplicates(entries, pins, drop, near_duplicate)
    _drop_superseded(entries, pins, drop)
    after = [e for i, e in enumerate(entries) if i not in drop]
    changes = [drop[i] for i in sorted(drop)]
    proposal = Proposal(target, list(entries), after, changes, store.limit(target), target_ratio,
                        state.raw, related=related)
    _headroom_note(proposal)
    return proposal


def _mark(drop: dict[int, Change], entries: list[str], i: int, reason: str) -> None:
    """Propose dropping entry ``i`` (0-based) for ``reason``."""
    drop[i] = Change("drop", [i + 1], [entries[i]], None, reason)


def _drop_same_text(entries: list[str], pins: set[str], drop: dict[int, Change]) -> None:
    """Mark exact duplicates and entries equal apart from case, punctuation or spacing."""
    first_of: dict[str, int] = {}
    normal_of: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry in first_of:
            _mark(drop, entries, i, f"exact duplicate of entry {first_of[entry] + 1}")
            continue
        first_of[entry] = i
        norm = _normal(entry)
        j = normal_of.get(norm)
        if j is None:
            normal_of[norm] = i
            continue
        keep, gone = (i, j) if entries[j] in pins and entries[i] not in pins else (j, i)
        if entries[gone] in pins:
            continue
        _mark(drop, entries, gone, f"same text as entry {keep + 1} apart from case, punctuation "
                                   "or spacing")
        if keep == i:
            normal_of[norm] = i


def _drop_near_duplicates(entries: list[str], pins: set[str], drop: dict[int, Change],
                          near_duplicate: float) -> list[list[int]]:
    """Mark entries another one says everything of; return the related pairs (1-based)."""
    live = [i for i in range(len(entries)) if i not in drop]
    words = {i: _words(entries[i]) for i in live}
    related: list[list[int]] = []
    for a_pos, a in enumerate(live):
        for b in live[a_pos + 1:]:
            if a in drop or b in drop:
                continue
            wa, wb = words[a], words[b]
            if not wa or not wb:
                continue
            overlap = len(wa & wb) / len(wa | wb)
            if overlap < min(near_duplicate, RELATED):
                continue
            if overlap < near_duplicate or not (wa <= wb or wb <= wa):
                related.append([a + 1, b + 1])
                continue
            small, big = (a, b) if len(wa) < len(wb) or (wa == wb and a < b) else (b, a)
            if entries[small] not in pins:
                _mark(drop, entries, small, f"near duplicate of entry {big + 1} ({overlap:.0%} of "
                                            f"words shared); entry {big + 1} says everything it "
                                            "says")
    return related


def _drop_superseded(entries: list[str], pins: set[str], drop: dict[int, Change]) -> None:
    """Mark facts a later entry states again about the same subject (the last one wins)."""
    latest: dict[tuple[str, str], int] = {}
    keys = {i: _subject_key(entries[i]) for i in range(len(entries)) if i not in drop}
    for i in sorted(keys, reverse=True):  # walk from the newest: the last statement wins
        key = keys[i]
        if key is None:
            continue
        kind, subject, describe = key
        newer = latest.get((kind, subject))
        if newer is None:
            latest[(kind, subject)] = i
        elif entries[i] not in pins:
            _mark(drop, entries, i, f"superseded by entry {newer + 1}: both say {describe}; the "
                                    "later entry wins")


def _headroom_note(proposal: Proposal) -> None:
    goal = int(proposal.limit * proposal.target_ratio)
    if proposal.size_after > goal:
        proposal.notes.append(
            f"after these changes the store is still at {proposal.size_after:,}/"
            f"{proposal.limit:,} chars, above the target of {goal:,} "
            f"({proposal.target_ratio:.0%}); 'memory curate --model' can also merge and shorten "
            "entries")


# ---------------------------------------------------------------------------------- the model

MODEL_PROMPT = """\
You curate a bounded memory store. Its entries are numbered below; entries marked [pinned] must be \
kept word for word. Propose changes that make the store shorter without losing any fact that is \
still true: merge entries about the same thing into one shorter entry, shorten wordy entries, and \
drop entries a later entry contradicts. The store must end at most {goal} characters (entries \
joined by 3-character separators); it is now {size}.

Answer with JSON only, no prose:
{{"changes": [{{"kind": "merge", "entries": [2, 5], "new": "merged text", "reason": "why"}},
              {{"kind": "rewrite", "entries": [3], "new": "shorter text", "reason": "why"}},
              {{"kind": "drop", "entries": [4], "reason": "why"}}]}}
Use each entry number at most once. An empty list is a fine answer.

Entries:
{entries}"""


def _parse_model(text: str) -> list[dict[str, Any]]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise CuratorError("the model's answer held no JSON object; nothing was proposed")
    try:
        data = json.loads(text[start:end + 1])
    except ValueError as exc:
        raise CuratorError(f"the model's answer is not valid JSON ({exc}); nothing was "
                           "proposed") from None
    changes = data.get("changes") if isinstance(data, dict) else None
    if not isinstance(changes, list):
        raise CuratorError('the model\'s answer has no "changes" list; nothing was proposed')
    return [c for c in changes if isinstance(c, dict)]


def model_changes(proposal: Proposal, llm: Any, *, model: str | None = None,
                  timeout: float = 120.0, pins: set[str] | None = None) -> Proposal:
    """Extend ``proposal`` with the model's merges, rewrites and drops; return the new proposal.

    ``llm`` is a :class:`hermes_core.llm.ChatLLM` (the auxiliary model). Raises
    :class:`CuratorError` when the answer is unusable or would break a rule (over the limit, a
    blocked pattern, a pinned entry touched): the proposal is then refused as a whole.
    """
    from hermes_core.types import Message

    pins = pins or set()
    current = list(proposal.after)
    listing = "\n".join(f"{n}. {'[pinned] ' if e in pins else ''}{e}"
                        for n, e in enumerate(current, start=1))
    goal = int(proposal.limit * proposal.target_ratio)
    prompt = MODEL_PROMPT.format(goal=goal, size=joined_size(current), entries=listing)
    text = llm.complete(system="You keep an assistant's long-term memory tidy and accurate.",
                        messages=[Message("user", prompt)], max_tokens=2000, model=model,
                        timeout=timeout)
    raw = _parse_model(text)
    position = _store_positions(proposal, current)
    used: set[int] = set()
    replacement: dict[int, str | None] = {}
    extra: list[Change] = []
    for number, item in enumerate(raw, start=1):
        kind, idx, new, reason = _model_change(number, item, current, pins, used, proposal.limit)
        for pos, i in enumerate(idx):
            replacement[i] = new if pos == 0 else None
        extra.append(Change(kind, [position[i] for i in idx], [current[i] for i in idx], new,
                            reason))
    after = _replaced(current, replacement)
    size = joined_size(after)
    if size > proposal.limit:
        raise CuratorError(f"the model's proposal would leave the store at {size:,} characters, "
                           f"over its limit of {proposal.limit:,}; it was refused and nothing "
                           "was changed", target=proposal.target)
    out = Proposal(proposal.target, proposal.before, after, proposal.changes + extra,
                   proposal.limit, proposal.target_ratio, proposal.base, related=[])
    _headroom_note(out)
    return out


def _store_positions(proposal: Proposal, current: list[str]) -> list[int]:
    """The 1-based position in the store as read of each entry the model numbered.

    The model numbers the entries left after the offline changes; a change reports positions in
    the store as read, like the offline ones.
    """
    gone = {n for c in proposal.changes for n in c.entries}
    position = [n for n in range(1, len(proposal.before) + 1) if n not in gone]
    if len(position) != len(current):  # a proposal that already merged: number as given
        position = list(range(1, len(current) + 1))
    return position


def _model_change(number: int, item: dict[str, Any], current: list[str], pins: set[str],
                  used: set[int], limit: int) -> tuple[str, list[int], str | None, str]:
    """``(kind, 0-based entries, new text, reason)`` of the model's change ``number``, checked;
    the entries it names are added to ``used``."""
    kind = str(item.get("kind") or "")
    refs = item.get("entries")
    reason = str(item.get("reason") or "").strip() or "proposed by the model"
    if kind not in ("merge", "rewrite", "drop") or not isinstance(refs, list) or not refs:
        raise CuratorError(f"model change {number} is malformed (kind {kind!r}, entries "
                           f"{refs!r}); nothing was proposed")
    idx = [_claim_entry(number, kind, ref, current, pins, used) for ref in refs]
    new = None if kind == "drop" else _checked_text(number, item, limit)
    return kind, idx, new, reason


def _claim_entry(number: int, kind: str, ref: object, current: list[str], pins: set[str],
                 used: set[int]) -> int:
    """The 0-based index of entry ``ref`` of change ``number``, marked used; refused when it does
    not exist, is already used, or is pinned."""
    if not isinstance(ref, int) or not 1 <= ref <= len(current) or ref in used:
        raise CuratorError(f"model change {number} names entry {ref!r}, which does not "
                           "exist or is already used by another change; nothing was "
                           "proposed")
    if current[ref - 1] in pins:
        raise CuratorError(f"model change {number} would {kind} pinned entry {ref} "
                           f"({current[ref - 1][:60]!r}); pinned entries are kept as "
                           "they are, so the proposal was refused")
    used.add(ref)
    return ref - 1


def _checked_text(number: int, item: dict[str, Any], limit: int) -> str:
    """The stripped ``new`` text of change ``number``, checked like a tool write."""
    new = str(item.get("new") or "").strip()
    problem = entry_problem(new, limit)
    if problem is not None:
        raise CuratorError(f"model change {number}: {problem}; nothing was proposed")
    finding = scan(new)
    if finding is not None:
        raise CuratorError(f"model change {number} was refused by the threat scan: "
                           f"{finding.message()} Nothing was proposed.")
    return new


def _replaced(current: list[str], replacement: dict[int, str | None]) -> list[str]:
    """``current`` with each replaced entry swapped for its new text (``None``: removed)."""
    after = []
    for i, entry in enumerate(current):
        if i not in replacement:
            after.append(entry)
        elif replacement[i] is not None:
            after.append(str(replacement[i]))
    return after


# ------------------------------------------------------------------------------------ applying

def apply_proposal(store: MemoryStore, proposal: Proposal, *,
                   by: Provenance | None = None) -> WriteResult | None:
    """Write ``proposal`` as one version; ``None`` when it changes nothing.

    Refused (nothing written) when the store changed since the proposal was made, when a pinned
    entry would disappear, or when the result breaks the limit or the threat scan.
    """
    from .ops import check_entries

    if not proposal.changes:
        return None
    pins = pinned_entries(store, proposal.target)
    lost = [e for e in proposal.before if e in pins and e not in proposal.after]
    if lost:
        raise CuratorError(f"the proposal would drop pinned entry {lost[0][:60]!r}; pinned "
                           "entries are never dropped. Nothing was changed.",
                           target=proposal.target)
    problems = check_entries(proposal.after, limit=proposal.limit)
    if problems:
        raise CuratorError("the proposal was refused, nothing was changed:\n"
                           + "\n".join(f"  - {p}" for p in problems), target=proposal.target)
    changes: list[dict[str, object]] = [
        {"target": proposal.target, "action": c.kind, "old": "\n---\n".join(c.old),
         "new": c.new, "reason": c.reason} for c in proposal.changes
    ]
    try:
        return store.overwrite(proposal.target, proposal.after, expected=proposal.base,
                               by=by or Provenance("curator"), action="curate", changes=changes)
    except MemoryRefused as exc:
        if "changed while" in exc.message:
            raise CuratorError(
                f"{store.path(proposal.target).name} changed since the proposal was made; "
                "nothing was applied. Run 'hermes-core memory curate' again.",
                target=proposal.target) from None
        raise
