"""Opening a store's component in the ``storage.url`` database: the pool, migrated once.

A store (the skills library, the lossless engine's spans, the memory history, ...) calls
:func:`open_component` with its component name and migrations. The first call per process, URL
and component runs :func:`.migrations.migrate` (under its advisory lock: a newer schema or a
foreign database is refused, nothing is changed); later calls only return the pool, so a store
opened per user or per command costs no extra round trips.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .migrations import PgMigration, migrate
from .pool import connect_error, get_pool, import_psycopg
from .url import StorageURL

__all__ = ["forget_migrations", "open_component", "run_on"]

T = TypeVar("T")
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


def run_on(pool: Any, fn: Callable[[Any], T], *, retry: bool) -> T:
    """``fn(connection)`` on a connection of ``pool``; psycopg's errors reach the caller.

    When the server drops connections (a restart, a failover, an administrator), every idle
    connection of the pool is dead, and each would fail its next user once. On a connection
    failure this checks the whole pool at once (dead connections are replaced), so one
    failure clears the outage for everyone; then it runs ``fn`` once more when ``retry`` is
    set. Pass ``retry`` only for work that is safe to repeat (reads): a write whose connection
    died may or may not have committed, so it is reported, never repeated.
    """
    psycopg = import_psycopg()
    try:
        with pool.connection() as con:
            return fn(con)
    except psycopg.OperationalError:
        with contextlib.suppress(Exception):
            pool.check()
        if not retry:
            raise
    with pool.connection() as con:
        return fn(con)
