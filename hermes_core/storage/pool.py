"""One psycopg connection pool per database URL and process.

The first use of a URL makes one direct connection, so an unreachable server or a refused login
is reported at once, naming the URL (password redacted) and the server's reason, instead of
surfacing later as a pool timeout. Nothing falls back to SQLite.
"""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from .errors import StorageConnectError, StorageError
from .url import StorageURL, parse_storage_url, redact_url

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["close_pools", "connect_error", "get_pool", "import_psycopg", "pool_class"]

_pools: dict[str, ConnectionPool[Any]] = {}
_lock = threading.Lock()
_exit_hook = False
CONNECT_TIMEOUT = 10
#: how long a checkout waits for the pool before asking the server directly whether it answers
PROBE_AFTER = 3.0
_pool_class: Any = None


def import_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise StorageError(
            "storage.url is a PostgreSQL URL but psycopg is not installed: "
            "pip install 'hermes-core-kernel[postgres]' (psycopg[binary,pool])") from None
    return psycopg


def pool_class() -> Any:
    """psycopg's ConnectionPool, with a checkout that does not wait on a pool that cannot help.

    When no connection came within :data:`PROBE_AFTER` seconds, the checkout connects to the
    server directly. When that fails, it raises that connection's error at once
    (``OperationalError``: connection refused, ...) instead of waiting the whole timeout (60 s, a
    turn lock's 600 s) for a pool that cannot connect. When the server answers, that connection
    serves the checkout and is closed when it is returned: after an outage the pool retries its
    lost connections with exponential back-off (1, 2, 4, ... s, up to minutes apart), and a
    server back in between would otherwise wait for the pool's next attempt. At most
    ``max_size`` such connections are open at once (a pool that is merely busy borrows as many);
    past that, the checkout waits for the pool as before."""
    global _pool_class
    if _pool_class is None:
        psycopg = import_psycopg()
        from psycopg_pool import ConnectionPool, PoolTimeout

        class FailFastPool(ConnectionPool):  # type: ignore[type-arg]
            def __init__(self, conninfo: str, *, max_size: int, kwargs: dict[str, Any],
                         **options: Any) -> None:
                # a direct connection is made as the pool makes its own
                self._direct_args = (conninfo, {"connect_timeout": CONNECT_TIMEOUT, **kwargs})
                self._direct: set[int] = set()  # id() of the direct connections given out
                self._spare = threading.BoundedSemaphore(max_size)
                super().__init__(conninfo, max_size=max_size, kwargs=kwargs, **options)

            def getconn(self, timeout: float | None = None) -> Any:
                wait = self.timeout if timeout is None else timeout
                if wait <= PROBE_AFTER:
                    return super().getconn(timeout=wait)
                try:
                    return super().getconn(timeout=PROBE_AFTER)
                except PoolTimeout:
                    pass
                # raises OperationalError when the server is down or refuses us
                conninfo, kwargs = self._direct_args
                direct = psycopg.connect(conninfo, **kwargs)
                if not self._spare.acquire(blocking=False):
                    direct.close()
                    return super().getconn(timeout=wait - PROBE_AFTER)
                self._direct.add(id(direct))
                return direct

            def putconn(self, conn: Any) -> None:
                if id(conn) in self._direct:
                    self._direct.discard(id(conn))
                    conn.close()
                    self._spare.release()
                    return
                super().putconn(conn)

        _pool_class = FailFastPool
    return _pool_class


def connect_error(url: StorageURL, exc: BaseException) -> StorageConnectError:
    """A clear error for a failed connection; the server's reason, never the password."""
    reason = redact_url(str(exc).strip()) or type(exc).__name__
    secret = urlsplit(url.url).password
    for shown in {secret, unquote(secret)} if secret else ():
        reason = reason.replace(shown, "***")  # the server's text may quote it in any form
    if "password authentication failed" in reason or "no password supplied" in reason:
        hint = "check the user name and password in storage.url"
    elif "does not exist" in reason:
        hint = "create the database (createdb) or fix its name in storage.url"
    else:
        hint = "check that the server runs and accepts TCP connections at that host and port"
    return StorageConnectError(f"cannot connect to the storage database {url.redacted}: "
                               f"{reason}. {hint}; nothing was stored elsewhere")


def get_pool(url: str | StorageURL, *, max_size: int = 10) -> ConnectionPool[Any]:
    """The open pool for ``url`` (created, after a checked first connection, on first use)."""
    parsed = url if isinstance(url, StorageURL) else parse_storage_url(url)
    with _lock:
        pool = _pools.get(parsed.url)
        if pool is not None and not pool.closed:
            return pool
        psycopg = import_psycopg()
        try:
            psycopg.connect(parsed.url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error as exc:
            raise connect_error(parsed, exc) from None
        fresh: ConnectionPool[Any] = pool_class()(
            parsed.url, min_size=1, max_size=max_size, open=True, timeout=60.0,
            # autocommit: a single statement is one round trip; several statements that must
            # commit together run in ``with con.transaction():``
            # no parallel workers: starting them costs more than the short queries they would help
            kwargs={"connect_timeout": CONNECT_TIMEOUT, "autocommit": True,
                    "options": "-c max_parallel_workers_per_gather=0"},
            name=f"hermes:{parsed.database}",
        )
        global _exit_hook
        if not _exit_hook:
            atexit.register(close_pools)  # a clean goodbye to the server at exit
            _exit_hook = True
        _pools[parsed.url] = fresh
        return fresh


def close_pools() -> None:
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close(timeout=5.0)
