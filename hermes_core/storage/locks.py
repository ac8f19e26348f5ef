"""Cross-node conversation locks: a PostgreSQL advisory lock per conversation key.

Several ``serve`` nodes sharing one ``storage.url`` must never run two turns of one conversation
at once (each would build its reply on a history missing the other's turn). A turn holds
``pg_advisory_lock(hash(platform, key))`` on a connection of its own for its whole duration; the
server releases it when the turn ends, or when the node dies (its connection closes), so a killed
node never leaves a conversation locked. Different conversations hash to different locks and run
in parallel.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Any

from .errors import StorageConnectError
from .pool import connect_error, import_psycopg, pool_class
from .url import StorageURL

__all__ = ["ConversationLocks", "lock_id"]

#: how long a turn waits for its conversation's lock held by another node (a turn's bound)
LOCK_TIMEOUT_MS = 600_000
_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def lock_id(platform: str, key: str) -> int:
    """The advisory lock key of a conversation: a signed 64-bit hash of platform and key."""
    digest = hashlib.blake2b(f"hermes-turn\0{platform}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ConversationLocks:
    """Advisory locks on the database at ``url``, on a pool of their own (``max_size`` turns
    may hold or wait for one at a time on this node)."""

    def __init__(self, url: StorageURL, *, max_size: int = 64) -> None:
        self.url = url
        psycopg = import_psycopg()
        with _pools_lock:
            pool = _pools.get(url.url)
            if pool is None or pool.closed:
                try:
                    psycopg.connect(url.url, connect_timeout=10).close()
                except psycopg.Error as exc:
                    raise connect_error(url, exc) from None
                pool = _pools[url.url] = pool_class()(
                    url.url, min_size=1, max_size=max_size, open=True, timeout=60.0,
                    kwargs={"autocommit": True, "connect_timeout": 10,
                            "options": f"-c lock_timeout={LOCK_TIMEOUT_MS}"},
                    name=f"hermes-locks:{url.database}")
        self.pool = pool
        self._psycopg = psycopg

    @contextlib.contextmanager
    def hold(self, platform: str, key: str, *, timeout: float = LOCK_TIMEOUT_MS / 1000
             ) -> Iterator[None]:
        """Hold the conversation's lock for the block; wait at most ``timeout`` seconds for it.

        Raises :class:`StorageConnectError` when the database cannot be reached or the lock is
        not granted in time (another node holds it that long)."""
        from psycopg_pool import PoolTimeout

        ident = lock_id(platform, key)
        psycopg = self._psycopg
        try:
            with self._locked(ident, key, timeout) as con:
                try:
                    yield
                finally:
                    with contextlib.suppress(psycopg.Error):  # a lost connection frees it too
                        con.execute("SELECT pg_advisory_unlock(%s)", (ident,))
                        if timeout * 1000 != LOCK_TIMEOUT_MS:
                            con.execute("RESET lock_timeout")
        except PoolTimeout as exc:
            raise connect_error(self.url, exc) from None
        except psycopg.OperationalError as exc:
            raise connect_error(self.url, exc) from None


    @contextlib.contextmanager
    def _connection_with(self, ident: int, key: str, timeout: float) -> Iterator[Any]:
        """A pooled connection holding the lock ``ident``."""
        psycopg = self._psycopg
        with self.pool.connection(timeout=timeout) as con:
            try:
                if timeout * 1000 != LOCK_TIMEOUT_MS:
                    con.execute(f"SET lock_timeout = {max(1, int(timeout * 1000))}")
                con.execute("SELECT pg_advisory_lock(%s)", (ident,))
            except psycopg.errors.LockNotAvailable:
                raise StorageConnectError(
                    f"conversation {key!r} stayed locked by another node for {timeout:.0f}s "
                    f"({self.url.redacted}); retry later") from None
            yield con

    @contextlib.contextmanager
    def _locked(self, ident: int, key: str, timeout: float) -> Iterator[Any]:
        """:meth:`_connection_with`, once more on a fresh connection when the first was dead
        (the server dropped the pool's idle connections: a restart, a failover). Safe to
        repeat: a dead connection was granted no lock."""
        with contextlib.ExitStack() as stack:
            try:
                con = stack.enter_context(self._connection_with(ident, key, timeout))
            except self._psycopg.OperationalError:
                with contextlib.suppress(Exception):
                    self.pool.check()  # replaces every dead connection at once
                con = stack.enter_context(self._connection_with(ident, key, timeout))
            yield con


def close_lock_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close(timeout=5.0)
