"""Which medium the curated memory uses: files in the home, or the ``storage.url`` database.

With ``memory.scope: user`` each user key has a memory of its own: ``memories/users/<folder>/``
in the home (the key's case-distinct folder name, see :mod:`.user_folders`), or the rows owned by
``<key>`` in the database. The shared (global) memory is
``memories/`` itself, or the rows owned by ''.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hermes_core.storage import resolve_storage_url
from hermes_core.users import check_user_key

from .store import MemoryStore
from .user_folders import user_dir, user_owners

if TYPE_CHECKING:
    from hermes_core.storage.url import StorageURL

    from .config import FileMemoryConfig

__all__ = ["memory_dir", "open_store", "store_at", "user_keys"]


def memory_dir(home: Path, user: str | None = None) -> Path:
    """The folder of the shared memory, or of one user's memory (an old-named folder of that
    user is renamed first: :func:`.user_folders.user_dir`)."""
    base = Path(home) / "memories"
    return user_dir(base, user) if user else base


def open_store(
    config: FileMemoryConfig, home: Path, storage_url: str | None = None,
    user: str | None = None,
) -> MemoryStore:
    """The memory store the configuration selects, for the shared memory or one user's."""
    return store_at(config, home, resolve_storage_url(storage_url), user)


def store_at(config: FileMemoryConfig, home: Path, url: StorageURL | None,
             user: str | None = None) -> MemoryStore:
    """The memory store in the database at ``url``, or in the home's files when it is None
    (named by the caller: ``$HERMES_CORE_STORAGE_URL`` is not consulted)."""
    if url is not None:
        from .pg_store import PgMemoryStore

        return PgMemoryStore(url, owner=check_user_key(user) if user else "",
                             memory_limit=config.memory_char_limit,
                             user_limit=config.user_char_limit,
                             history_limit=config.history_limit)
    return MemoryStore(memory_dir(home, user), memory_limit=config.memory_char_limit,
                       user_limit=config.user_char_limit, history_limit=config.history_limit)


def user_keys(home: Path, storage_url: str | None = None) -> list[str]:
    """Every user key that has a memory: its folder under ``memories/users`` (file backend), or
    its rows in the ``storage.url`` database. The shared memory ('') is not listed."""
    url = resolve_storage_url(storage_url)
    if url is not None:
        from .pg_store import database_owners

        return [owner for owner in database_owners(url) if owner]
    return user_owners(Path(home) / "memories")
