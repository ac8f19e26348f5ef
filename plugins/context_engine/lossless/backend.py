"""Which archive the lossless engine uses: ``context.db`` in the home, or the ``storage.url``
database (so every node serving a conversation sees the spans any node archived)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.storage import resolve_storage_url

from .store import SpanStore

if TYPE_CHECKING:
    from hermes_core.storage.url import StorageURL

__all__ = ["open_span_store", "span_store_at"]


def open_span_store(context: Any, path: Path) -> Any:
    """:class:`~.pg_store.PgSpanStore` when ``storage.url`` (or ``$HERMES_CORE_STORAGE_URL``)
    is set, else the SQLite :class:`~.store.SpanStore` at ``path``; never a silent fallback."""
    storage = getattr(getattr(context, "config", None), "storage", None)
    return span_store_at(resolve_storage_url(getattr(storage, "url", None)), path)


def span_store_at(url: StorageURL | None, path: Path) -> Any:
    """The archive in the database at ``url``, or the SQLite file at ``path`` when it is None
    (named by the caller: ``$HERMES_CORE_STORAGE_URL`` is not consulted)."""
    if url is not None:
        from .pg_store import PgSpanStore

        return PgSpanStore(url)
    return SpanStore(path)
