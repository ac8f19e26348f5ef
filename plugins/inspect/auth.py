"""Who may use the inspector: the home's bearer token, user-scoped tokens, one-time links.

* The home's token (:mod:`hermes_core.bearer`: ``$HERMES_CORE_MCP_TOKEN`` or the 0600
  ``mcp-token`` file, the same credential as ``mcp serve --transport http``) sees everything and
  may name any user key.
* A user-scoped token (``hermes-core inspect token --user KEY``) sees that user's memory and
  sessions only. Only its SHA-256 is kept, in the home's 0600 ``inspect-tokens`` file.
* ``hermes-core inspect`` prints (and opens) a one-time link ``/login?code=...``: redeeming it sets
  a session cookie (HttpOnly, SameSite=Strict) for the page, with the scope the link was made for.
  A code works once and for :data:`LINK_SECONDS` only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hermes_core.atomic import atomic_write
from hermes_core.bearer import Credential
from hermes_core.private import private_dir
from hermes_core.users import check_user_key

__all__ = ["COOKIE", "Access", "Gate", "issue_user_token", "user_tokens"]

COOKIE = "hermes_inspect"
#: user-scoped tokens: {sha256 hex: user key}
TOKENS_FILE = "inspect-tokens"
LINK_SECONDS = 600.0
SESSION_SECONDS = 12 * 3600.0


@dataclass(frozen=True)
class Access:
    """A caller's scope: ``user`` None sees the whole home."""

    user: str | None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def user_tokens(home: Path) -> dict[str, str]:
    """The user-scoped tokens' digests and their user keys ({} when there are none)."""
    try:
        data = json.loads((home / TOKENS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{home / TOKENS_FILE} cannot be read ({exc}); delete it and issue the "
                         "user tokens again with 'hermes-core inspect token --user KEY'") from None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def issue_user_token(home: Path, user: str) -> str:
    """A new token that sees ``user``'s memory and sessions only; returned (shown) once."""
    user = check_user_key(user)
    tokens = user_tokens(home)
    token = secrets.token_urlsafe(32)
    tokens[_digest(token)] = user
    atomic_write(private_dir(home) / TOKENS_FILE, (json.dumps(tokens, indent=1) + "\n").encode())
    return token


class Gate:
    """Checks each request's credential (thread-safe)."""

    def __init__(self, credential: Credential, home: Path) -> None:
        self.credential = credential
        self.home = home
        self._lock = threading.Lock()
        self._links: dict[str, tuple[float, Access]] = {}
        self._cookies: dict[str, tuple[float, Access]] = {}

    def link_code(self, user: str | None = None) -> str:
        """A new one-time code for ``/login?code=``."""
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._links[code] = (time.monotonic() + LINK_SECONDS, Access(user))
        return code

    def redeem(self, code: str) -> str | None:
        """The session cookie for a valid unused code (the code is spent), else None."""
        with self._lock:
            entry = self._links.pop(code, None)
            if entry is None or entry[0] < time.monotonic():
                return None
            cookie = secrets.token_urlsafe(32)
            self._cookies[cookie] = (time.monotonic() + SESSION_SECONDS, entry[1])
            return cookie

    def check(self, authorization: str | None, cookie: str | None) -> Access | None:
        """The caller's scope, or None when neither credential is valid."""
        if authorization:
            if self.credential.accepts(authorization.encode("latin-1", "replace")):
                return Access(None)
            if authorization.startswith("Bearer "):
                digest = _digest(authorization[len("Bearer "):].strip())
                try:
                    tokens = user_tokens(self.home)
                except ValueError:
                    tokens = {}
                for known, user in tokens.items():
                    if hmac.compare_digest(known, digest):
                        return Access(user)
            return None
        if cookie:
            with self._lock:
                entry = self._cookies.get(cookie)
                if entry is not None and entry[0] >= time.monotonic():
                    return entry[1]
        return None
