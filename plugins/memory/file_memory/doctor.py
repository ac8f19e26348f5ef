"""``hermes-core doctor``'s checks of MEMORY.md and USER.md (the ``doctor_checks`` hook).

Each file: readable, UTF-8, within its limit, in the form the store writes. Only read: a file
that cannot be used is left untouched and the check says how to start that store afresh. The
per-user folders: one under its old name is reported (renamed when that user's memory is next
opened), and one whose old and new names both exist is an error (see :mod:`.user_folders`).
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_core.config import LoadedConfig, validate_section
from hermes_core.doctor import DoctorCheck
from hermes_core.errors import HermesCoreError
from hermes_core.users import user_folder_name

from .config import FileMemoryConfig
from .entries import joined_size, usage_label
from .store import FILENAMES, MemoryStore
from .user_folders import UserFolderConflict, old_named_folders, user_owners, users_dir

__all__ = ["memory_file_checks"]


def memory_file_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    try:
        settings = validate_section(config, "file_memory", FileMemoryConfig, plugin="file_memory")
    except HermesCoreError:  # the config check names the error; judge the files by the defaults
        settings = FileMemoryConfig()
    store = MemoryStore(Path(home) / "memories", memory_limit=settings.memory_char_limit,
                        user_limit=settings.user_char_limit)
    out: list[DoctorCheck] = []
    from hermes_core.storage import StorageError, resolve_storage_url

    try:
        url = resolve_storage_url(config.core.storage.url)
    except StorageError:  # the config check reports a bad URL
        url = None
    if url is not None:  # the files are not in use: say where the memory is instead
        return [DoctorCheck(filename, True, f"not used: the memory is in the database {url} "
                            "(storage.url; the activation check connects to it)")
                for filename in FILENAMES.values()]
    folder = Path(home) / "memories"
    if folder.exists() and not folder.is_dir():  # the files' own advice could not work
        return [DoctorCheck(filename, False, f"{folder} is a file, not a folder, so "
                            f"{filename} cannot be kept in it. It was left untouched: look at "
                            f"it, then move it aside (mv {folder} {folder}.aside); the memory "
                            "folder is created afresh on the next change")
                for filename in FILENAMES.values()]
    for target, filename in FILENAMES.items():
        path = store.path(target)
        state = store.read(target)
        if state.problem is not None:
            out.append(DoctorCheck(
                filename, False, f"{state.problem}. It was left untouched: fix it, or move it "
                f"aside (mv {path} {path}.corrupt) to start that store afresh"))
            continue
        if state.raw is None:
            out.append(DoctorCheck(filename, True, f"{path} not created yet"))
            continue
        size, limit = joined_size(state.entries), store.limit(target)
        notes = []
        if size > limit:
            notes.append(f"over its limit ({usage_label(size, limit)}): the agent can only "
                         "remove or shorten entries; trim it with 'hermes-core memory edit'")
        if b"\r" in state.raw:
            notes.append("has Windows (CRLF) line endings: it reads fine and is rewritten "
                         "with \\n endings (after a .bak copy) on the next change")
        elif state.edited:
            notes.append("was edited by hand (not in the store's exact form): a .bak copy is "
                         "made before the next change rewrites it")
        out.append(DoctorCheck(
            filename, True, f"{path}: {len(state.entries)} entries, {usage_label(size, limit)}"
            + "".join(f"; {n}" for n in notes), warning=bool(notes)))
    return out + user_folder_checks(Path(home) / "memories")


def user_folder_checks(memories: Path) -> list[DoctorCheck]:
    """The per-user folders (none when there is no ``memories/users``): how many users, and
    each folder still under its old name (a warning) or under both names (an error)."""
    users = users_dir(memories)
    if not users.is_dir():
        return []
    out: list[DoctorCheck] = []
    listing = set(os.listdir(users))  # exact case
    for name in old_named_folders(users):
        new = users / user_folder_name(name)
        if new.name in listing:
            out.append(DoctorCheck("memories/users", False,
                                   str(UserFolderConflict(name, users / name, new))))
        else:
            out.append(DoctorCheck(
                "memories/users", True, f"{users / name} is the memory of user {name!r} under "
                f"its old folder name; it is renamed to {new.name} (nothing else changes) when "
                "that user's memory is next opened", warning=True))
    if not out:
        out.append(DoctorCheck("memories/users", True,
                               f"{users}: the memories of {len(user_owners(memories))} user(s)"))
    return out
