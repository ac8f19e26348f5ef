"""Which archive the lossless engine uses: ``context.db`` in the home, or the ``storage.url``
database (so every node serving a conversation sees the spans any node archived)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_core.storage import resolve_storage_url

from .store import SpanStore

__all__ = ["open_span_store"]


def open_span_store(context: Any, path: Path) -> Any:
    """:class:`~.pg_store.PgSpanStore` when ``storage.url`` (or ``$HERMES_CORE_STORAGE_URL``)
    is set, else the SQLite :class:`~.store.SpanStore` at ``path``; never a silent fallback."""
    storage = getattr(getattr(context, "config", None), "storage", None)
    url = resolve_storage_url(getattr(storage, "url", None))
    if url is not None:
        from .pg_store import PgSpanStore

        return PgSpanStore(url)
    return SpanStore(path)
