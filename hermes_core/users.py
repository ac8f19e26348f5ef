"""User keys: who a platform message comes from, for ``memory.scope: user``.

A user key names a folder (``memories/users/<folder name>/``) and a database owner, and it arrives
from the network (the webhook's ``user`` field), so it is checked strictly: 1 to 64 characters,
ASCII letters, digits and ``. _ @ -``, not starting with a dot or a dash.

Keys are case-sensitive ("Alice" and "alice" are two users), but the default file systems of macOS
and Windows are not: ``users/Alice`` and ``users/alice`` would be one folder there. So the folder
name of a key writes each uppercase letter as ``^`` and its lowercase (:func:`user_folder_name`:
"Alice" -> "^alice"); ``^`` is not allowed in keys, so the mapping has an inverse
(:func:`user_key_of_folder`) and no two keys get names that differ only in case. A key without
uppercase letters is its own folder name.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import HermesCoreError

__all__ = [
    "MAX_USER_KEY",
    "USER_ATTRIBUTE",
    "UserKeyError",
    "check_user_key",
    "legacy_user_folder",
    "session_user",
    "user_folder_name",
    "user_key_of_folder",
]

#: the session attribute holding the user key (set by the dispatcher from the platform message;
#: a compaction's child session copies the attributes, so the key follows the conversation)
USER_ATTRIBUTE = "user_id"

MAX_USER_KEY = 64
_ALLOWED = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9._@-]*")
#: written before the lowercase of an uppercase letter in a folder name (never in a key)
_UPPER_MARK = "^"
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


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


def user_folder_name(key: str) -> str:
    """The folder name of user ``key`` (checked): each uppercase letter becomes ``^`` and its
    lowercase, so the name has no uppercase letter and names that are equal ignoring case are
    the names of one key. ``"Alice"`` -> ``"^alice"``; ``"bob"`` -> ``"bob"``."""
    check_user_key(key)
    return "".join(_UPPER_MARK + c.lower() if c in _UPPER else c for c in key)


def user_key_of_folder(name: str) -> str | None:
    """The user key whose folder is named ``name`` (the inverse of :func:`user_folder_name`),
    or None when no key has that folder name (a stray folder, or one under an old name:
    see :func:`legacy_user_folder`)."""
    chars: list[str] = []
    marked = False
    for c in name:
        if marked:
            if c not in _LOWER:
                return None
            chars.append(c.upper())
            marked = False
        elif c == _UPPER_MARK:
            marked = True
        elif c in _UPPER:
            return None
        else:
            chars.append(c)
    if marked:
        return None
    key = "".join(chars)
    try:
        check_user_key(key)
    except UserKeyError:
        return None
    return key


def legacy_user_folder(name: str) -> str | None:
    """The key whose folder had the name ``name`` before folder names were made
    case-distinct (the key itself, with an uppercase letter), or None. An all-lowercase key's
    folder name never changed, so it is not a legacy name."""
    if not any(c in _UPPER for c in name):
        return None
    try:
        return check_user_key(name)
    except UserKeyError:
        return None


def session_user(session: Any) -> str | None:
    """The user key a session belongs to (``session.attributes["user_id"]``), or None."""
    if session is None:
        return None
    value = (getattr(session, "attributes", None) or {}).get(USER_ATTRIBUTE)
    return value if isinstance(value, str) and value else None
