"""The storage URL: which backend, and the URL with its password hidden for messages."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import StorageError

__all__ = ["STORAGE_URL_ENV", "StorageURL", "parse_storage_url", "redact_url", "redact_url_value",
           "resolve_storage_url"]

STORAGE_URL_ENV = "HERMES_CORE_STORAGE_URL"
_SCHEMES = ("postgresql", "postgres")
_MAX_URL = 4096
#: ``scheme://user:password@`` — the password part, in any URL-looking text (also with a slash
#: missing, ``scheme:/user:password@``, and with an unencoded ``@`` in the password: up to the
#: last ``@`` of the word)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*:/{0,3}[^:/@\s]*:)(?P<pw>\S*)(?=@)")
#: ``?password=`` in a URL, and ``password=`` in a libpq ``key=value`` connection string; also
#: the other query parameters that carry a credential in URLs (an MCP server's ``?token=``,
#: ``?api_key=``, a signed URL's ``sig=``)
_PW_PARAM = re.compile(
    r"(?i)(?P<head>(?:^|[?&\s'\"(])(?:password|passwd|token|access_token|auth_token|api_key|"
    r"apikey|key|secret|client_secret|sig|signature)\s*=\s*)"
    r"(?P<pw>'(?:[^'\\]|\\.)*'|[^&\s'\")]*)")
#: one URL, whole: everything between the user name's ``:`` and the last ``@``
_ONE_URL = re.compile(r"(?s)(?P<head>[^:]*:/*[^:/@]*:)(?P<pw>.*)@(?P<tail>[^@]*)")


def redact_url(text: str) -> str:
    """``text`` with every URL password (``user:PASSWORD@`` and ``?password=``) replaced."""
    text = _USERINFO.sub(lambda m: m.group("head") + "***", text)
    return _PW_PARAM.sub(lambda m: m.group("head") + "***", text)


def redact_url_value(value: str) -> str:
    """A configured value (maybe malformed) for an error message: its password hidden even when
    it holds spaces or ``@`` (everything between the user's ``:`` and the last ``@``)."""
    whole = _ONE_URL.fullmatch(value)
    if whole is not None:
        value = whole.group("head") + "***@" + whole.group("tail")
    return redact_url(value)


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
        raise StorageError(f"storage.url {redact_url_value(text)!r} is not a URL ({exc})") from None
    shown = redact_url_value(text)
    if parts.scheme.lower() not in _SCHEMES:
        raise StorageError(
            f"storage.url {shown!r}: unsupported scheme {parts.scheme or '(none)'!r}; use "
            "postgresql://user:password@host:5432/dbname, or unset storage.url for the SQLite "
            "files in the home")
    if not text.lower().startswith(tuple(f"{scheme}://" for scheme in _SCHEMES)):
        raise StorageError(
            f"storage.url {shown!r} does not start with {parts.scheme.lower()}://; write "
            "postgresql://user:password@host:5432/dbname")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text):
        raise StorageError(
            f"storage.url {shown!r} holds a space or a control character; percent-encode it "
            "(a space in the password is %20)")
    if parts.netloc.count("@") > 1:
        raise StorageError(
            f"storage.url {shown!r} has more than one '@' before the host; percent-encode an "
            "'@' in the user name or password as %40")
    if not parts.path.strip("/"):
        raise StorageError(f"storage.url {shown!r} names no database: add /dbname")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise StorageError(f"storage.url {shown!r} has an invalid port") from None
    # psycopg accepts both schemes; normalise so one database has one pool key
    normal = urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, parts.fragment))
    return StorageURL(normal)


def resolve_storage_url(configured: str | None) -> StorageURL | None:
    """The URL in effect: ``$HERMES_CORE_STORAGE_URL``, else ``configured``; None = SQLite."""
    value = os.environ.get(STORAGE_URL_ENV) or configured
    if value is None or not value.strip():
        return None
    return parse_storage_url(value)
