"""The curated memory's part of ``hermes-core storage migrate`` (the ``copy_storage`` hook).

Every owner is copied: the shared memory and each user's (``memories/users/<folder>/``, named by
the key its folder name maps back to). The source is only read, except that opening a user's
folder under its old name renames it to its new name (:mod:`.user_folders`). For each owner, in
this order:

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
from hermes_core.config import validate_section
from hermes_core.private import private_dir
from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

from .backend import memory_dir, store_at
from .config import FileMemoryConfig
from .history import FileHistory, Version
from .pins import _update, read_pins
from .store import TARGETS, MemoryStore, file_bytes
from .user_folders import user_owners

__all__ = ["MemoryCopy", "copy_memory", "copy_owner", "import_history", "put_document"]


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
    private_dir(store.directory)
    atomic_write(store.path(target), file_bytes(entries))
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


def copy_memory(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    settings = validate_section(source.config, "file_memory", FileMemoryConfig,
                                plugin="file_memory")
    if source.url is not None:
        from .pg_store import database_owners

        owners = database_owners(source.url)
    else:
        owners = owners_of(memory_dir(source.home))
    out = MemoryCopy()
    for done, owner in enumerate(owners):
        progress("memory owners", done, len(owners))
        copy_owner(store_at(settings, source.home, source.url, owner or None),
                   store_at(settings, target.home, target.url, owner or None), owner, out)
    if owners:
        progress("memory owners", len(owners), len(owners))
    lines = [f"memory {label}: copied" for label in out.copied]
    lines += [f"memory {label}: the target already holds other entries; left as they are"
              for label in out.kept]
    lines.append(f"memory history: {out.versions} version(s), {out.pins} pin(s) copied")
    return CopyReport(
        copied={"memory_documents": len(out.copied), "memory_versions": out.versions,
                "memory_pins": out.pins},
        skipped={"memory_documents": len(out.kept)}, lines=lines,
        detail={"copied": list(out.copied), "kept": list(out.kept)})
