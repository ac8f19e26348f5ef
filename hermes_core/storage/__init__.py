"""Where the built-in stores keep their data: SQLite files in the home, or one PostgreSQL database.

``storage.url`` in config.yaml (env ``HERMES_CORE_STORAGE_URL``) selects it: unset means today's
SQLite files; ``postgresql://user:password@host:port/dbname`` puts every built-in store that
supports it into that database. This package is the shared part every store uses:

* :mod:`.url`: parsing and validating the URL, and redacting its password in every message;
* :mod:`.pool`: one psycopg connection pool per URL and process, opened with a clear error when
  the server is unreachable or refuses the login (never a silent fallback to SQLite);
* :mod:`.migrations`: forward-only, versioned schema migrations per component, recorded in one
  ``hermes_schema`` table; a newer schema or a foreign database is refused with a clear error.

psycopg 3 (``pip install 'hermes-core-kernel[postgres]'``) is imported only when a PostgreSQL URL
is used.
"""

from __future__ import annotations

from .errors import (
    StorageConnectError,
    StorageError,
    StorageForeignError,
    StorageVersionError,
)
from .url import StorageURL, parse_storage_url, redact_url, resolve_storage_url

__all__ = [
    "StorageConnectError",
    "StorageError",
    "StorageForeignError",
    "StorageURL",
    "StorageVersionError",
    "close_pools",
    "get_pool",
    "parse_storage_url",
    "redact_url",
    "resolve_storage_url",
]


def get_pool(url: str | StorageURL, **kwargs: object) -> object:
    """The process-wide connection pool for ``url`` (see :func:`.pool.get_pool`)."""
    from .pool import get_pool as _get_pool

    return _get_pool(url, **kwargs)  # type: ignore[arg-type]


def close_pools() -> None:
    """Close every pool this process opened (tests, shutdown)."""
    import sys

    mod = sys.modules.get(f"{__name__}.pool")
    if mod is not None:
        mod.close_pools()
    component = sys.modules.get(f"{__name__}.component")
    if component is not None:
        component.forget_migrations()
    locks = sys.modules.get(f"{__name__}.locks")
    if locks is not None:
        locks.close_lock_pools()
