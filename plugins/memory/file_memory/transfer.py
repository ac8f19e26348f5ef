"""Copying one owner's curated memory between backends (``hermes-core storage migrate``).

For the shared memory and each user's, in this order:

1. the history: every retained version, with its number, provenance and texts, when the target
   owner has no version yet (a target that already has a history keeps it as it is);
2. MEMORY / USER: copied into a document that is empty in the target, without recording a
   version (the copied history already ends with this text); a document that already holds other
   entries is left as it is and reported;
3. the pins, added to the target's.

Running it again copies nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_core.atomic import atomic_write
from hermes_core.private import private_dir

from .entries import canonical_text
from .history import FileHistory, Version
from .pins import _update, read_pins
from .store import TARGETS, MemoryStore
from .user_folders import user_owners

__all__ = ["MemoryCopy", "copy_owner", "import_history", "put_document"]


@dataclass
class MemoryCopy:
    #: "<owner>/<target>" of each document copied, and of those left alone
    copied: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    versions: int = 0
    pins: int = 0


def import_history(store: MemoryStore, versions: list[Version]) -> int:
    """Give ``store`` these versions when it has none; how many were written."""
    history = store.history
    if history is None or not versions:
        return 0
    if isinstance(history, FileHistory):
        private_dir(history.directory)
    return history.import_versions(versions)


def put_document(store: MemoryStore, target: str, entries: list[str]) -> bool:
    """Write ``entries`` into ``target`` if it is empty there, recording no version."""
    own = getattr(store, "put_document", None)  # the database store
    if own is not None:
        return bool(own(target, entries))
    if store.read(target).entries:
        return False
    text = canonical_text(entries)
    private_dir(store.directory)
    atomic_write(store.path(target), (text + "\n").encode() if text else b"")
    return True


def copy_owner(source: MemoryStore, target: MemoryStore, owner: str, out: MemoryCopy) -> None:
    """Copy ``source`` (one owner's memory) into ``target`` (see the module docstring)."""
    if source.history is not None:
        out.versions += import_history(target, source.history.read())
    for name in TARGETS:
        entries = source.read(name).entries
        label = f"{owner or '(shared)'}/{name}"
        if not entries:
            continue
        have = target.read(name).entries
        if have:
            if have != entries:
                out.kept.append(label)
            continue
        if put_document(target, name, entries):
            out.copied.append(label)
    pins = read_pins(source)
    if any(pins.values()):
        added = 0

        def merge(current: dict[str, list[str]]) -> bool:
            nonlocal added
            for name, texts in pins.items():
                listed = current.setdefault(name, [])
                for text in texts:
                    if text not in listed:
                        listed.append(text)
                        added += 1
            return added > 0

        _update(target, merge)
        out.pins += added


def owners_of(home_memories: Any) -> list[str]:
    """The owners with a folder under ``memories/`` ('' for the shared memory, then the user
    keys, decoded from their folder names)."""
    owners = [""] if home_memories.is_dir() else []
    return owners + user_owners(home_memories)
