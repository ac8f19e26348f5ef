"""Changes that rewrite both stores at once (rollback to a version, and forget), and what
changed between two versions (diff).

Both lock MEMORY.md then USER.md (always in that order), re-read them, record one version and
write the files; if a write fails, the files already written are put back and the version is cut
from the history, so nothing is ever half-applied.

``forget`` over several owners' memories (the shared one and each user's) makes one report
(:func:`forget_in`). Every store is opened before anything is deleted (a store that cannot be
opened - a user folder under both its old and new names - fails the whole call with nothing
deleted). Each owner's deletion is all-or-nothing (:func:`forget_entries`); if one fails after
others were done, the error names the owners already done and says to run forget again, which
finishes the rest (a second run finds nothing where the first deleted).

``hermes-core memory diff VERSION`` shows what one version changed (each store it touched, from
its text right before to right after); ``memory diff VERSION OTHER`` how the stores differ between
right after VERSION and right after OTHER. Both read only the history (:class:`.history.History`,
or its PostgreSQL form), so they work the same for the shared memory and each user's, on both
backends (:func:`version_diff`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.atomic import atomic_write
from hermes_core.errors import HermesCoreError
from hermes_core.types import ForgetReport

from .entries import joined_size, parse_entries
from .errors import InvalidRequest, MemoryRefused
from .history import History, Provenance, UnknownVersion, matches_subject
from .ops import check_entries
from .store import FILENAMES, TARGETS, FileState, MemoryStore, file_bytes

__all__ = ["ForgetResult", "RollbackResult", "StoreDiff", "forget_entries", "forget_in", "rollback",
           "version_diff"]

#: the shortest subject ``forget`` accepts: shorter ones match far too much
MIN_SUBJECT = 3


@dataclass(slots=True)
class RollbackResult:
    restored: int
    #: the version the rollback recorded (``None`` when the stores were already in that state)
    version: int | None
    targets: list[str]
    redacted: bool = False


@dataclass(slots=True)
class ForgetResult:
    #: target -> the entries that mention the subject
    matched: dict[str, list[str]] = field(default_factory=dict)
    deleted: int = 0
    version: int | None = None
    #: versions of the history from which matching entries were removed
    history_redacted: int = 0
    dry_run: bool = False

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.matched.values())


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _write(path: Path, data: bytes) -> None:
    """The files' durable replace (:func:`hermes_core.atomic.atomic_write`, looked up at each
    call)."""
    atomic_write(path, data)


def rollback(store: MemoryStore, number: int, *, by: Provenance | None = None) -> RollbackResult:
    """Put both stores back exactly as they were right after version ``number``.

    The restored text must still fit today's limits and pass the threat scan (a limit may have
    been lowered, the scanner may know new patterns); otherwise nothing changes and the reasons
    are listed. The rollback is itself a new version, so it can be rolled back too.
    """
    history = store.history
    if history is None:
        raise InvalidRequest("the memory history is turned off (file_memory.history_limit: 0); "
                             "there is nothing to roll back to")
    try:
        source = history.get(number)
        wanted = history.state_at(number, TARGETS)
    except UnknownVersion as exc:
        raise InvalidRequest(str(exc)) from None
    problems = []
    for target, text in wanted.items():
        entries = parse_entries(text or "")
        for problem in check_entries(entries, limit=store.limit(target)):
            problems.append(f"{store.path(target).name}: {problem}")
    if problems:
        raise MemoryRefused(
            f"cannot roll back to version {number}; nothing was changed:\n"
            + "\n".join(f"  - {p}" for p in problems)
        )

    def compute(states: dict[str, FileState]) -> dict[str, bytes | None]:
        return {t: _encode(text) for t, text in wanted.items()}

    def changes(states: dict[str, FileState],
                new: dict[str, bytes | None]) -> list[dict[str, Any]]:
        from .store import describe_changes

        out: list[dict[str, Any]] = []
        for target, data in new.items():
            after = parse_entries(data.decode("utf-8")) if data is not None else []
            out += describe_changes(target, states[target].entries, after)
        return out

    version = store.write_stores(compute, by=by or Provenance(), action="rollback",
                                 changes=changes, restores=number, writer=_write)
    return RollbackResult(number, version.version if version else None,
                          sorted(wanted), redacted=source.redacted)


def check_subject(subject: object) -> str:
    """The stripped subject, or :class:`InvalidRequest` saying what is wrong with it."""
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidRequest("the text to forget is empty; give a word or phrase, e.g. "
                             "hermes-core forget \"Lisbon\"")
    text = subject.strip()
    if len(text) < MIN_SUBJECT:
        raise InvalidRequest(f"{text!r} is too short to forget safely (it would match almost "
                             f"everything); give at least {MIN_SUBJECT} characters")
    return text


def forget_entries(store: MemoryStore, subject: str, *, dry_run: bool = False,
                   by: Provenance | None = None) -> ForgetResult:
    """Delete every entry of both stores that mentions ``subject``, and scrub it from history.

    The version recorded says how many entries were deleted but not their text, and every older
    version loses the matching entries too, so the forgotten text is nowhere in the memory folder
    afterwards (``.bak`` copies of hand-edited files excepted: they are the user's own files).
    """
    subject = check_subject(subject)
    result = ForgetResult(dry_run=dry_run)
    for target in TARGETS:
        found = [e for e in store.read(target).entries if matches_subject(e, subject)]
        if found:
            result.matched[target] = found
    if dry_run:
        return result
    result.matched = {}

    def compute(states: dict[str, FileState]) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for target, state in states.items():
            kept = [e for e in state.entries if not matches_subject(e, subject)]
            if len(kept) != len(state.entries):
                result.matched[target] = [e for e in state.entries if e not in kept]
                out[target] = file_bytes(kept)
        return out

    def changes(states: dict[str, FileState],
                new: dict[str, bytes | None]) -> list[dict[str, Any]]:
        return [{"target": t, "action": "forget", "old": None, "new": None,
                 "entries": len(result.matched.get(t, [])),
                 "chars_freed": joined_size(states[t].entries)
                 - joined_size(parse_entries((d or b"").decode("utf-8")))}
                for t, d in new.items()]

    def scrub() -> None:
        if store.history is not None:
            result.history_redacted = store.history.redact(subject)

    version = store.write_stores(compute, by=by or Provenance(), action="forget",
                                 changes=changes, after_write=scrub, writer=_write)
    result.deleted = result.count
    if result.matched:
        from .pins import drop_pins

        drop_pins(store, result.matched)
        _drop_proposal(store)
    result.version = version.version if version else None
    return result


def _drop_proposal(store: MemoryStore) -> None:
    """Delete the background curator's saved proposal: it lists the store's entries as they
    were (the forgotten ones too), and no longer applies to the store once they are gone."""
    drop = getattr(store, "drop_proposal", None)  # the database store: a memory_state row
    if drop is not None:
        drop()
        return
    from .background import PROPOSAL_FILE

    (store.directory / PROPOSAL_FILE).unlink(missing_ok=True)


def _item(owner: str, target: str, entry: str) -> str:
    short = entry if len(entry) <= 100 else entry[:97] + "..."
    where = f"{owner}/{FILENAMES[target]}" if owner else FILENAMES[target]
    return f"{where}: {short}"


def forget_in(provider: str, owners: Sequence[tuple[str, MemoryStore]], subject: str, *,
              dry_run: bool) -> ForgetReport:
    """Forget ``subject`` in each (owner key or '' for the shared memory, store)."""
    report = ForgetReport(provider, dry_run=dry_run, total=0)
    done: list[str] = []
    for owner, store in owners:
        report.total = (report.total or 0) + sum(len(store.entries(t)) for t in TARGETS)
        try:
            result = forget_entries(store, subject, dry_run=dry_run, by=Provenance("cli"))
        except Exception as exc:
            if not done:
                raise
            raise HermesCoreError(
                f"forgetting in the memory of {owner or 'the shared memory'!r} failed ({exc}); "
                f"it was already forgotten in: {', '.join(repr(d) for d in done)}. Fix the "
                "cause and run forget again: it finishes the rest") from exc
        if not dry_run and result.count:
            done.append(owner or "(shared)")
        report.matched += result.count
        report.deleted += result.deleted
        report.items += [_item(owner, t, e) for t, entries in result.matched.items()
                         for e in entries]
        whose = f" of user {owner!r}" if owner else ""
        if result.version is not None:
            report.notes.append(f"recorded as memory version {result.version}{whose}")
        if result.history_redacted:
            report.notes.append(f"removed from {result.history_redacted} older version(s) of "
                                f"the memory history{whose}")
    return report


@dataclass(frozen=True)
class StoreDiff:
    """One store's text at two points of the history (``None``: no file) and their diff."""

    target: str
    old: str | None
    new: str | None
    old_label: str
    new_label: str

    @property
    def lines(self) -> list[str]:
        """The unified diff, line by line (no line endings); empty when the texts are equal."""
        name = FILENAMES[self.target]
        return list(difflib.unified_diff(
            (self.old or "").splitlines(), (self.new or "").splitlines(),
            fromfile=f"{name} ({self.old_label})", tofile=f"{name} ({self.new_label})",
            lineterm=""))

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "from": self.old_label, "to": self.new_label,
                "old": self.old, "new": self.new, "diff": self.lines}


def _before(versions: list[Any], number: int, target: str) -> str | None:
    """The text of ``target`` right before version ``number`` (which touched it)."""
    this = next(v for v in versions if v.version == number)
    if "before" in this.stores[target]:
        text: str | None = this.stores[target]["before"]
        return text
    earlier = [v for v in versions if v.version < number and target in v.stores]
    return earlier[-1].stores[target].get("after") if earlier else None


def version_diff(history: History | None, version: int, other: int | None = None,
                 targets: tuple[str, ...] = TARGETS) -> list[StoreDiff]:
    """What ``version`` changed in each of ``targets`` it touched, or (with ``other``) how each
    store differs between right after ``version`` and right after ``other``; stores that did
    not change are left out. An unknown version is refused (:class:`.errors.InvalidRequest`)
    with the range the history holds."""
    if history is None:
        raise InvalidRequest("the memory history is turned off (file_memory.history_limit: 0); "
                             "there are no versions to compare")
    try:
        if other is None:
            versions = history.read()
            touched = history.get(version).stores
            pairs = {t: (_before(versions, version, t), touched[t].get("after"))
                     for t in targets if t in touched}
            labels = (f"before version {version}", f"after version {version}")
        else:
            old, new = history.state_at(version, targets), history.state_at(other, targets)
            pairs = {t: (old[t], new[t]) for t in targets if t in old and t in new}
            labels = (f"after version {version}", f"after version {other}")
    except UnknownVersion as exc:
        raise InvalidRequest(str(exc)) from None
    return [StoreDiff(t, a, b, *labels) for t, (a, b) in pairs.items() if a != b]
