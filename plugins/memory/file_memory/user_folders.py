"""The folders of per-user memories: ``memories/users/<folder name>/`` (``memory.scope: user``).

A user key's folder name is :func:`hermes_core.users.user_folder_name` of it ("Alice" ->
"^alice"), so keys that differ only in case never share a folder, even on a file system that
ignores case (macOS, Windows). Before that, the folder was named by the key itself; such a folder
(an old name: a key with an uppercase letter) is renamed to its new name when a key equal to it
ignoring case is next opened (:func:`user_dir`), under the users folder's rename lock and the
folder's own store locks, so nothing in it is lost: MEMORY.md, USER.md, the history, pins, intents
and ``.bak`` copies all move with it. If the new name exists too, nothing is touched and
:class:`UserFolderConflict` says what to do.

An all-lowercase key's folder name did not change: nothing is renamed for it (but opening it
settles an old-named folder equal to it ignoring case first, which a case-insensitive file system
would otherwise hand to it).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from hermes_core.atomic import fsync_dir, locked
from hermes_core.errors import HermesCoreError
from hermes_core.users import legacy_user_folder, user_folder_name, user_key_of_folder

from .history import HISTORY_FILE
from .store import FILENAMES

__all__ = [
    "UserFolderConflict",
    "old_named_folders",
    "user_dir",
    "user_owners",
    "users_dir",
]

log = logging.getLogger("hermes_core.plugins.file_memory")

#: ``memories/users/.rename.lock``: held while old-named folders are checked and renamed (a name
#: starting with a dot is never a user's folder)
_RENAME_LOCK = ".rename"


class UserFolderConflict(HermesCoreError):
    """A user's memory is in a folder under its old name and one under its new name."""

    def __init__(self, key: str, old: Path, new: Path) -> None:
        aside = old.parent.parent / f"{old.name}.old-name"
        message = (
            f"the memory of user {key!r} is in two folders: {old} (its folder name before user "
            f"folders became case-distinct) and {new} (its name now). Nothing was changed. Keep "
            f"one: copy any entries you want from the other's MEMORY.md / USER.md into it by "
            f"hand, then move the other out of {old.parent} (for example: mv '{old}' '{aside}'), "
            "and open the memory again."
        )
        super().__init__(message)
        self.key, self.old, self.new = key, old, new


def users_dir(memories: Path) -> Path:
    """``memories/users``: where the per-user folders are."""
    return Path(memories) / "users"


def _listing(users: Path) -> list[str]:
    """The exact names in ``users`` (none when it does not exist)."""
    try:
        return sorted(os.listdir(users))
    except (FileNotFoundError, NotADirectoryError):
        return []


def old_named_folders(users: Path, key: str | None = None) -> list[str]:
    """The folders of ``users`` under an old name (a key with an uppercase letter); only those
    equal to ``key`` ignoring case when it is given."""
    wanted = key.lower() if key is not None else None
    return [name for name in _listing(users)
            if legacy_user_folder(name) is not None
            and (wanted is None or name.lower() == wanted) and (users / name).is_dir()]


def user_dir(memories: Path, key: str) -> Path:
    """The folder of user ``key`` (checked: :class:`hermes_core.users.UserKeyError`), after
    renaming any old-named folder equal to ``key`` ignoring case (:class:`UserFolderConflict`
    when its new name is taken too)."""
    users = users_dir(memories)
    name = user_folder_name(key)
    if _may_have_old_name(users, key) and old_named_folders(users, key):
        settle_old_names(users, key)
    return users / name


def _may_have_old_name(users: Path, key: str) -> bool:
    """Whether a folder under an old name equal to ``key`` ignoring case can be there, told by
    one or two stats, so that opening a user's memory does not list a users folder of many
    thousand users. ``users/<key>`` missing: no such folder (a file system that ignores case
    would find any spelling of it). A key with an uppercase letter: only an old name is spelt
    so (new names have none). An all-lowercase key's own folder has that name, so an old name
    can only hide behind it where case is ignored, which ``users/<KEY>`` then also finds."""
    if not (users / key).exists():
        return False
    if key != key.lower():
        return True
    return key != key.upper() and (users / key.upper()).exists()


def settle_old_names(users: Path, key: str | None = None) -> list[tuple[Path, Path]]:
    """Rename the old-named folders of ``users`` (those equal to ``key`` ignoring case, or all)
    to their new names; (old, new) of each renamed. All are checked before any is renamed."""
    with locked(users / _RENAME_LOCK):
        listing = set(_listing(users))
        moves = [(users / name, users / user_folder_name(name))
                 for name in old_named_folders(users, key)]
        for old, new in moves:
            if new.name in listing:  # an exact-case name: the new folder exists
                raise UserFolderConflict(old.name, old, new)
        for old, new in moves:
            _rename(old, new)
            log.info("file_memory: renamed the memory folder of user %r from %s to %s "
                     "(case-distinct folder names)", old.name, old.name, new.name)
    return moves


def _rename(old: Path, new: Path) -> None:
    """``old`` -> ``new`` holding the old folder's store locks (the locks a writer of that
    folder takes, stores before history), so no write is under way in it meanwhile."""
    with contextlib.ExitStack() as stack:
        for filename in [*FILENAMES.values(), HISTORY_FILE]:
            stack.enter_context(locked(old / filename))
        os.rename(old, new)
    fsync_dir(old.parent)


def user_owners(memories: Path) -> list[str]:
    """The user keys that have a folder under ``memories/users`` (new or old names), sorted;
    folders that are no user's (a stray name) are left out."""
    keys: set[str] = set()
    for name in _listing(users_dir(memories)):
        key = user_key_of_folder(name) or legacy_user_folder(name)
        if key is not None and (users_dir(memories) / name).is_dir():
            keys.add(key)
    return sorted(keys)
