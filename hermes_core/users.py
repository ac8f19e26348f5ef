"""User keys: who a platform message comes from, for ``memory.scope: user``.

A user key names a folder (``memories/users/<key>/``) and a database owner, and it arrives from
the network (the webhook's ``user`` field), so it is checked strictly: 1 to 64 characters, ASCII
letters, digits and ``. _ @ -``, not starting with a dot or a dash.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import HermesCoreError

__all__ = ["MAX_USER_KEY", "USER_ATTRIBUTE", "UserKeyError", "check_user_key", "session_user"]

#: the session attribute holding the user key (set by the dispatcher from the platform message;
#: a compaction's child session copies the attributes, so the key follows the conversation)
USER_ATTRIBUTE = "user_id"

MAX_USER_KEY = 64
_ALLOWED = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9._@-]*")


class UserKeyError(HermesCoreError, ValueError):
    """A user key that is empty, too long or has characters outside the allowed set."""


def check_user_key(value: object) -> str:
    """``value`` if it is a valid user key; else :class:`UserKeyError` saying what is wrong."""
    if not isinstance(value, str):
        raise UserKeyError(f"the user key must be a string, not {type(value).__name__}")
    if not value:
        raise UserKeyError("the user key is empty; give 1 to 64 characters")
    if len(value) > MAX_USER_KEY:
        raise UserKeyError(f"the user key is {len(value):,} characters long; the limit is "
                           f"{MAX_USER_KEY}")
    if not _ALLOWED.fullmatch(value):
        bad = next((c for c in value if not re.fullmatch(r"[A-Za-z0-9._@-]", c)), None)
        if bad is None:  # every character is allowed: the first may not be '.' or '-'
            raise UserKeyError(f"the user key {value[:40]!r} starts with {value[0]!r}; it must "
                               "start with an ASCII letter, a digit, _ or @")
        raise UserKeyError(f"the user key {value[:40]!r} has a character that is not allowed "
                           f"({bad!r}); use ASCII letters, digits and . _ @ - (not first: . -)")
    return value


def session_user(session: Any) -> str | None:
    """The user key a session belongs to (``session.attributes["user_id"]``), or None."""
    if session is None:
        return None
    value = (getattr(session, "attributes", None) or {}).get(USER_ATTRIBUTE)
    return value if isinstance(value, str) and value else None
