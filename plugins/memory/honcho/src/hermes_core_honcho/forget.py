"""``forget`` for Honcho: what its API can delete, and a plain account of what it cannot.

Honcho's v3 API deletes *conclusions* (``DELETE /conclusions/{id}``) and lets a client rewrite
a *peer card* (``PUT /peers/{observer}/card``). It has no call that deletes a message. So
``forget`` deletes every conclusion the agent holds about the user that mentions the subject,
drops the card lines that mention it, and reports that messages cannot be deleted here (they stay
on the server, and a server-side deriver may draw conclusions from them again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MESSAGES_NOTE", "HonchoForget", "find_and_delete"]

MESSAGES_NOTE = (
    "Honcho's API has no call to delete messages: messages already sent to the Honcho server "
    "that mention it stay there (and its deriver may conclude it again from them). Delete the "
    "Honcho sessions or the workspace on the server to remove them."
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
