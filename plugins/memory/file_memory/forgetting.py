"""``forget`` over several owners' memories (the shared one and each user's): one report.

Every store is opened before anything is deleted (a store that cannot be opened - a user folder
under both its old and new names - fails the whole call with nothing deleted). Each owner's
deletion is all-or-nothing (:func:`.versions.forget_entries`); if one fails after others were
done, the error names the owners already done and says to run forget again, which finishes the
rest (a second run finds nothing where the first deleted).
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_core.errors import HermesCoreError
from hermes_core.types import ForgetReport

from .history import Provenance
from .store import FILENAMES, TARGETS, MemoryStore

__all__ = ["forget_in"]


def _item(owner: str, target: str, entry: str) -> str:
    short = entry if len(entry) <= 100 else entry[:97] + "..."
    where = f"{owner}/{FILENAMES[target]}" if owner else FILENAMES[target]
    return f"{where}: {short}"


def forget_in(provider: str, owners: Sequence[tuple[str, MemoryStore]], subject: str, *,
              dry_run: bool) -> ForgetReport:
    """Forget ``subject`` in each (owner key or '' for the shared memory, store)."""
    from .versions import forget_entries

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
