"""``forget`` for Honcho: what its API can delete, and a plain account of what it cannot.

Honcho's v3 API deletes *conclusions* (``DELETE /conclusions/{id}``) and lets a client rewrite
a *peer card* (``PUT /peers/{observer}/card``). It has no call that deletes a message. So
``forget`` deletes every conclusion the agent holds about the user that mentions the subject,
drops the card lines that mention it, and reports that messages cannot be deleted here (they stay
on the server, and a server-side deriver may draw conclusions from them again).

Writes still waiting in the outbox (Honcho was down or slow) are scrubbed first
(:func:`scrub_outbox`): their messages and notes that mention the subject are never sent, the
rest are sent as before, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_core.storage.spool import Spool

__all__ = ["IN_FLIGHT_NOTE", "MESSAGES_NOTE", "HonchoForget", "find_and_delete", "scrub_outbox"]

Job = dict[str, Any]

MESSAGES_NOTE = (
    "Honcho's API has no call to delete messages: messages already sent to the Honcho server "
    "that mention it stay there (and its deriver may conclude it again from them). Delete the "
    "Honcho sessions or the workspace on the server to remove them."
)


IN_FLIGHT_NOTE = (
    "a write to Honcho that mentions it was being sent when forget ran and could not be held "
    "back; run forget again once Honcho has answered"
)


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(slots=True)
class HonchoForget:
    conclusions: list[tuple[str, str]] = field(default_factory=list)  #: (id, content)
    card_lines: list[str] = field(default_factory=list)
    deleted: int = 0


def find_and_delete(client: Any, *, observer: str, observed: str, subject: str,
                    dry_run: bool) -> HonchoForget:
    """Find (and unless ``dry_run`` delete) the conclusions and card lines mentioning
    ``subject``. A failure part-way raises a message saying what was already deleted."""
    needle = _squash(subject)
    found = HonchoForget([(c.id, c.content) for c in client.all_conclusions(
        observer=observer, observed=observed) if needle in _squash(c.content)])
    card = client.get_card(observer, target=observed) or []
    found.card_lines = [line for line in card if needle in _squash(line)]
    if dry_run:
        return found
    try:
        if found.card_lines:
            client.set_card(observer, [line for line in card if line not in found.card_lines],
                            target=observed)
            found.deleted += len(found.card_lines)
        for cid, _content in found.conclusions:
            client.delete_conclusion(cid)
            found.deleted += 1
    except Exception as exc:
        raise RuntimeError(f"Honcho failed after deleting {found.deleted} of "
                           f"{len(found.card_lines) + len(found.conclusions)} item(s): {exc}. "
                           "Run forget again to delete the rest.") from exc
    return found


def _mentions(needle: str, value: Any) -> bool:
    return isinstance(value, str) and needle in _squash(value)


def _outbox_edit(needle: str, mine: Callable[[Job], bool]) -> Callable[[Job], Job | None]:
    """What forgetting does to one outbox job: its messages mentioning ``needle`` go (a job left
    without any still creates its session), a note (``conclude``) or a note's removal
    (``forget``, which the forget's own deletion covers) mentioning it goes; the rest stays."""

    def edit(job: Job) -> Job | None:
        if not mine(job):
            return job
        kind = job.get("kind")
        if kind == "messages" and isinstance(job.get("messages"), list):
            kept = [m for m in job["messages"]
                    if not (isinstance(m, dict) and _mentions(needle, m.get("content")))]
            if len(kept) == len(job["messages"]):
                return job
            if kept:
                return {**job, "messages": kept}
            return {**{k: v for k, v in job.items() if k != "messages"}, "kind": "session"}
        if kind in ("conclude", "forget") and _mentions(needle, job.get("content")):
            return None
        return job

    return edit


def _describe(jobs: list[Job], needle: str) -> list[str]:
    items = []
    for job in jobs:
        if job.get("kind") == "messages":
            items += [f"pending message (not sent yet): {m['content'][:80]}"
                      for m in job["messages"]
                      if isinstance(m, dict) and _mentions(needle, m.get("content"))]
        elif job.get("kind") == "conclude":
            items.append(f"pending conclusion (not sent yet): {job['content'][:80]}")
        elif job.get("kind") == "forget":
            items.append(f"pending removal of a conclusion: {job['content'][:80]}")
    return items


def scrub_outbox(spool: Spool, subject: str, mine: Callable[[Job], bool], *,
                 dry_run: bool, rejected: Spool | None = None) -> tuple[list[str], str | None]:
    """Remove (unless ``dry_run``) what the outbox's jobs for which ``mine`` holds say about
    ``subject``, matched as the server's items are, and the same in the jobs Honcho refused
    (``rejected``) and the outbox's unreadable lines (any that mention it); return one line per
    item removed (or that would be), and a note when a job mentioning it was being sent and could
    not be held back."""
    needle = _squash(subject)
    edit = _outbox_edit(needle, mine)
    done = spool.scrub(edit, rejected=rejected, dry_run=dry_run,
                       mentions=lambda text: needle in _squash(text))
    items = _describe(done.removed, needle)
    items += [item.replace("pending", "refused", 1).replace("not sent yet", "kept aside")
              for item in _describe(done.rejected, needle)]
    items += [f"unreadable outbox line: {' '.join(text.split())[:80]}"
              for text in done.unreadable]
    return items, (None if done.settled else IN_FLIGHT_NOTE)
