"""Opening a store's component in the ``storage.url`` database: the pool, migrated once.

A store (the skills library, the lossless engine's spans, the memory history, ...) calls
:func:`open_component` with its component name and migrations. The first call per process, URL
and component runs :func:`.migrations.migrate` (under its advisory lock: a newer schema or a
foreign database is refused, nothing is changed); later calls only return the pool, so a store
opened per user or per command costs no extra round trips.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from .migrations import PgMigration, migrate
from .pool import connect_error, get_pool, import_psycopg
from .url import StorageURL

__all__ = ["forget_migrations", "open_component"]

_migrated: set[tuple[str, str]] = set()
_lock = threading.Lock()


def open_component(url: StorageURL, component: str, migrations: Sequence[PgMigration]) -> Any:
    """The connection pool of ``url`` with ``component``'s schema brought up to date.

    Raises :class:`~.errors.StorageConnectError` (the URL redacted) when the server cannot be
    reached, :class:`~.errors.StorageVersionError` for a newer schema and
    :class:`~.errors.StorageForeignError` for a database that is not hermes-core's.
    """
    psycopg = import_psycopg()
    pool: Any = get_pool(url)
    key = (url.url, component)
    with _lock:
        if key in _migrated:
            return pool
        try:
            with pool.connection() as con:
                migrate(con, url, component, migrations)
        except psycopg.OperationalError as exc:
            raise connect_error(url, exc) from None
        _migrated.add(key)
    return pool


def forget_migrations() -> None:
    """Check every component's schema again on its next open (after the pools were closed)."""
    with _lock:
        _migrated.clear()
