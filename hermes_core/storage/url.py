"""The storage URL: which backend, and the URL with its password hidden for messages."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import StorageError

__all__ = ["STORAGE_URL_ENV", "StorageURL", "parse_storage_url", "redact_url",
           "resolve_storage_url"]

STORAGE_URL_ENV = "HERMES_CORE_STORAGE_URL"
_SCHEMES = ("postgresql", "postgres")
_MAX_URL = 4096
#: ``scheme://user:password@`` — the password part, in any URL-looking text
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)(?=@)")
_PW_PARAM = re.compile(r"(?i)(?P<head>[?&]password=)(?P<pw>[^&\s]*)")


def redact_url(text: str) -> str:
    """``text`` with every URL password (``user:PASSWORD@`` and ``?password=``) replaced."""
    text = _USERINFO.sub(lambda m: m.group("head") + "***", text)
    return _PW_PARAM.sub(lambda m: m.group("head") + "***", text)


@dataclass(frozen=True)
class StorageURL:
    """A validated PostgreSQL URL."""

    url: str

    @property
    def redacted(self) -> str:
        return redact_url(self.url)

    @property
    def database(self) -> str:
        return unquote(urlsplit(self.url).path.lstrip("/"))

    def __str__(self) -> str:  # never print the password by accident
        return self.redacted

    def __repr__(self) -> str:
        return f"StorageURL({self.redacted!r})"


def parse_storage_url(value: str) -> StorageURL:
    """Validate a ``storage.url``; raise :class:`StorageError` naming what is wrong."""
    text = value.strip()
    if len(text) > _MAX_URL:
        raise StorageError(f"storage.url is {len(text)} characters long; a database URL is "
                           f"at most {_MAX_URL}")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise StorageError(f"storage.url {redact_url(text)!r} is not a URL ({exc})") from None
    if parts.scheme.lower() not in _SCHEMES:
        shown = redact_url(text)
        raise StorageError(
            f"storage.url {shown!r}: unsupported scheme {parts.scheme or '(none)'!r}; use "
            "postgresql://user:password@host:5432/dbname, or unset storage.url for the SQLite "
            "files in the home")
    if not parts.path.strip("/"):
        raise StorageError(f"storage.url {redact_url(text)!r} names no database: add /dbname")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise StorageError(f"storage.url {redact_url(text)!r} has an invalid port") from None
    # psycopg accepts both schemes; normalise so one database has one pool key
    normal = urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, parts.fragment))
    return StorageURL(normal)


def resolve_storage_url(configured: str | None) -> StorageURL | None:
    """The URL in effect: ``$HERMES_CORE_STORAGE_URL``, else ``configured``; None = SQLite."""
    value = os.environ.get(STORAGE_URL_ENV) or configured
    if value is None or not value.strip():
        return None
    return parse_storage_url(value)
