"""The errors of the session archive; each says what is wrong and what to do about it."""

from __future__ import annotations

from hermes_core.errors import HermesCoreError, NotStored

__all__ = [
    "ArchiveBusyError",
    "ArchiveCorruptError",
    "ArchiveError",
    "ArchiveFullError",
    "ArchiveReadOnlyError",
    "ArchiveVersionError",
    "ArchiveWriteError",
    "ImportFormatError",
    "MessageNotStored",
    "QueryError",
    "SessionNotFoundError",
]


class ArchiveError(HermesCoreError):
    """Base class of the session archive's errors."""


class ArchiveCorruptError(ArchiveError):
    """state.db exists but cannot be used; it is never modified or overwritten."""


class ArchiveVersionError(ArchiveError):
    """state.db was written by a newer hermes-core (its schema version is unknown here)."""


class ArchiveBusyError(ArchiveError):
    """Another process held the write lock longer than the configured busy timeout."""


class ArchiveFullError(ArchiveError):
    """The disk (or the database's size limit) is full; nothing already stored is affected."""


class ArchiveReadOnlyError(ArchiveError):
    """The archive was opened read-only (a read-only home) and cannot be written."""


class ArchiveWriteError(ArchiveError):
    """A message could not be stored in the archive; the message says where it was kept."""


class MessageNotStored(ArchiveWriteError, NotStored):
    """A message could not be stored and was not kept anywhere either: the turn must not be
    answered (the kernel fails it, so the sender sends the message again)."""


class SessionNotFoundError(ArchiveError):
    """No session has the given id."""


class QueryError(ArchiveError):
    """A search query cannot be run; the message says how to rephrase it."""


class ExclusionOnlyQuery(QueryError):
    """A query that only says what to leave out (``-word``, ``NOT word``): nothing to search
    for, by words or by meaning (the meaning of ``-dogs`` is dogs)."""


class ImportFormatError(ArchiveError):
    """A JSONL import file has a malformed line; the message names the line."""
