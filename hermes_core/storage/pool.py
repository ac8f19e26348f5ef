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
    """psycopg's ConnectionPool, with a checkout that tells a server that went away from a busy
    pool: when no connection came within :data:`PROBE_AFTER` seconds, it connects to the server
    directly, and when that fails, raises that connection's error at once (``OperationalError``:
    connection refused, ...) instead of waiting the whole timeout (60 s, a turn lock's 600 s)
    for a pool that cannot connect. A server that answers means the pool is busy: it waits on."""
    global _pool_class
    if _pool_class is None:
        psycopg = import_psycopg()
        from psycopg_pool import ConnectionPool, PoolTimeout

        class FailFastPool(ConnectionPool):  # type: ignore[type-arg]
            def getconn(self, timeout: float | None = None) -> Any:
                wait = self.timeout if timeout is None else timeout
                if wait <= PROBE_AFTER:
                    return super().getconn(timeout=wait)
                try:
                    return super().getconn(timeout=PROBE_AFTER)
                except PoolTimeout:
                    pass
                # raises OperationalError when the server is down or refuses us
                psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT).close()
                return super().getconn(timeout=wait - PROBE_AFTER)

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
