"""The home's bearer token, shared by every local HTTP server that serves the memory stack
(``hermes-core mcp serve --transport http``, ``hermes-core inspect``): where it comes from, how it
is checked, how it is replaced. A public kernel module, so the servers need not import each other.

Every HTTP request must carry ``Authorization: Bearer <token>``, on loopback too: any local user
(or a program running as one) can connect to 127.0.0.1, and the served stack reads and writes the
user's memory. The token is, in order:

1. the environment variable named by ``mcp.token_env`` (``HERMES_CORE_MCP_TOKEN``), if set;
2. else the file ``mcp-token`` in the home. It is created on first use (``0600``, a random token)
   and the token is shown once, with a client configuration to paste. A file that others may read
   (group or other permission bits), that belongs to another user, or that does not hold a usable
   token stops the server from starting, naming the fix.

A running server re-reads the file when it changes (looked at no more than once a second), so
``hermes-core mcp token --rotate`` revokes the old token without a restart. If the file becomes
unusable while serving, every request is refused (fail closed) until it is fixed.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
import stat
import threading
import time
from pathlib import Path

from hermes_core.atomic import atomic_write
from hermes_core.private import private_dir

__all__ = ["MIN_LENGTH", "TOKEN_FILE", "Credential", "CredentialError", "resolve", "rotate"]

log = logging.getLogger(__name__)

#: the token file, in the home
TOKEN_FILE = "mcp-token"
MIN_LENGTH = 16
#: a token is printable ASCII without spaces (it travels in an HTTP header)
_TOKEN_RE = re.compile(r"^[\x21-\x7e]+$")
#: how often a running server looks at the token file for a rotation, in seconds
_RECHECK = 1.0


class CredentialError(Exception):
    """No usable token: the message names what is wrong and how to fix it."""


def _usable(token: str, where: str) -> str:
    if not token:
        raise CredentialError(f"{where} is empty")
    if not _TOKEN_RE.match(token):
        raise CredentialError(f"{where} does not hold a usable bearer token (it must be printable "
                              "ASCII without spaces)")
    if len(token) < MIN_LENGTH:
        raise CredentialError(f"{where} is too short to be a bearer token: use at least "
                              f"{MIN_LENGTH} random characters")
    return token


def _read_file(path: Path) -> tuple[str, tuple[int, int, int]]:
    """The token in ``path`` and the file's identity; raises :class:`CredentialError`."""
    fix = "delete it to have a new token generated, or run 'hermes-core mcp token --rotate'"
    try:
        info = path.stat()
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CredentialError(f"the token file {path} is missing: run 'hermes-core mcp token "
                              "--rotate' to create one") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialError(f"the token file {path} cannot be read ({exc}); {fix}") from None
    if info.st_uid != os.geteuid():
        raise CredentialError(f"the token file {path} belongs to another user (uid {info.st_uid}); "
                              f"{fix}")
    loose = stat.S_IMODE(info.st_mode) & 0o077
    if loose:
        raise CredentialError(
            f"the token file {path} may be read by other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); run 'chmod 600 {path}' (and, if others may have "
            "read it, 'hermes-core mcp token --rotate' to replace the token)")
    try:
        token = _usable(raw.strip(), f"the token file {path}")
    except CredentialError as exc:
        raise CredentialError(f"{exc}; {fix}") from None
    return token, (info.st_ino, info.st_mtime_ns, info.st_size)


class Credential:
    """The token a running server demands (thread-safe; :meth:`accepts` is the per-request check)."""

    def __init__(self, token: str, path: Path | None = None,
                 identity: tuple[int, int, int] | None = None) -> None:
        self.path = path
        self._expected: bytes | None = f"Bearer {token}".encode()
        self._identity = identity
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def accepts(self, header: bytes) -> bool:
        """Whether an ``Authorization`` header value carries the current token."""
        if self.path is not None and time.monotonic() - self._checked >= _RECHECK:
            self._recheck()
        expected = self._expected
        return expected is not None and hmac.compare_digest(header, expected)

    def _recheck(self) -> None:
        with self._lock:
            if time.monotonic() - self._checked < _RECHECK:
                return
            self._checked = time.monotonic()
            assert self.path is not None
            try:
                info = self.path.stat()
                if (info.st_ino, info.st_mtime_ns, info.st_size) == self._identity:
                    return
                token, self._identity = _read_file(self.path)
            except (OSError, CredentialError) as exc:
                if self._expected is not None:
                    log.error("refusing every MCP request until the token file is fixed: %s", exc)
                self._expected, self._identity = None, None
                return
            self._expected = f"Bearer {token}".encode()
            log.warning("the MCP bearer token changed (%s); the previous one is refused from now on",
                        self.path)


def resolve(home: Path, token_env: str) -> tuple[Credential, str | None]:
    """The server's credential, and the token when it was just generated (to be shown once).

    Raises :class:`CredentialError` for an unusable variable or file."""
    given = os.environ.get(token_env)
    if given is not None and given.strip():
        return Credential(_usable(given.strip(), f"the environment variable {token_env}")), None
    path = home / TOKEN_FILE
    if not path.exists() and not path.is_symlink():
        token = rotate(home)
        _token, identity = _read_file(path)
        return Credential(token, path, identity), token
    token, identity = _read_file(path)
    return Credential(token, path, identity), None


def rotate(home: Path) -> str:
    """Write a new random token to the home's token file (0600, replacing any old one); return it.
    A token file that is a symbolic link stays one: the file it points to is replaced.

    Raises :class:`CredentialError` when the file cannot be written (nothing is changed)."""
    token = secrets.token_urlsafe(32)
    path = home / TOKEN_FILE
    # a symbolic link stays one: the file it points to is replaced (as config.yaml's)
    try:
        target = path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of links (Python < 3.13)
        raise CredentialError(f"cannot follow the link {path} to the token file ({exc}); "
                              "nothing was changed. Point it at a file, or delete it, and run "
                              "the command again") from None
    if target.is_dir():
        shown = path if target == path else f"{path} (a link to {target})"
        raise CredentialError(
            f"{shown} is a folder, not the token file, so no token can be written there; move it "
            "aside (or delete it if it is not yours) and run the command again")
    try:
        if target == path:
            private_dir(home)
        # a running server sees the new file whole, never half written
        atomic_write(target, (token + "\n").encode())
    except OSError as exc:
        raise CredentialError(
            f"cannot write the token file {path}: {exc.strerror or exc}; nothing was changed. "
            "Make the home writable (or set the token's environment variable) and run the "
            "command again") from None
    return token
