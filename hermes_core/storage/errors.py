"""The storage errors; every message names the URL with its password redacted."""

from __future__ import annotations

from ..errors import HermesCoreError

__all__ = ["StorageConnectError", "StorageError", "StorageForeignError", "StorageVersionError"]


class StorageError(HermesCoreError):
    """The configured storage cannot be used; the message says which and what to do."""


class StorageConnectError(StorageError):
    """The database server is unreachable, or refused the login."""


class StorageVersionError(StorageError):
    """The database holds a newer schema than this hermes-core knows: upgrade hermes-core."""


class StorageForeignError(StorageError):
    """The database holds tables that are not hermes-core's: use an empty database."""
