"""The kernel's notion of "now", settable per context (an evaluation replays dated sessions).

Everything that stamps time on kernel data (a :class:`~hermes_core.types.Message`'s
``timestamp``, a :class:`~hermes_core.types.Session`'s ``started_at``) reads :func:`now`. It is
the wall clock unless a caller pinned it with :func:`frozen_at` (or :func:`set_now`), which
``hermes-core eval`` does while it ingests a benchmark's haystack: a session dated 2023-05-20 in
the dataset is stored as started on that day, and a question asked "on 2023-06-01" is asked then.

The pin is a :class:`contextvars.ContextVar`: it holds in the thread (or task) that set it and in
contexts copied from it, never in unrelated threads, so a server handling live requests next to a
harness is not affected. Background threads see the pin only when the work is submitted with a
copy of the caller's context (``contextvars.copy_context().run``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["frozen_at", "now", "now_datetime", "set_now"]

_PINNED: contextvars.ContextVar[float | None] = contextvars.ContextVar("hermes_core_now", default=None)


def now() -> float:
    """Seconds since 1970 (UTC): the pinned instant if one is set in this context, else wall time."""
    pinned = _PINNED.get()
    return time.time() if pinned is None else pinned


def now_datetime() -> datetime:
    """:func:`now` as an aware UTC datetime."""
    from datetime import UTC, datetime  # not at module level: the kernel's import needs none

    return datetime.fromtimestamp(now(), tz=UTC)


def set_now(when: float | datetime | None) -> contextvars.Token[float | None]:
    """Pin "now" in this context (``None`` unpins); returns the token to restore the old value."""
    return _PINNED.set(_seconds(when))


@contextmanager
def frozen_at(when: float | datetime | None) -> Iterator[None]:
    """Within the block, :func:`now` returns ``when`` (seconds or a datetime; naive means UTC)."""
    token = _PINNED.set(_seconds(when))
    try:
        yield
    finally:
        _PINNED.reset(token)


def _seconds(when: float | datetime | None) -> float | None:
    if when is None:
        return None
    if isinstance(when, int | float):
        return float(when)
    from datetime import UTC, datetime

    if isinstance(when, datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    return float(when)
