"""The curated memory's part of ``hermes-core storage migrate`` (the ``copy_storage`` hook).

Every owner (the shared memory and each user's ``memories/users/<folder>/``, named by the key its
folder name maps back to): its history first (when that owner has no version in the target yet),
then MEMORY / USER into documents that are empty in the target, then its pins (added, never
removed). A document the target holds with other entries is left as it is and named in the report.
The source is only read, except that opening a user's folder under its old name renames it to its
new name (:mod:`.user_folders`).
"""

from __future__ import annotations

from hermes_core.config import validate_section
from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

from .backend import memory_dir, store_at
from .config import FileMemoryConfig
from .transfer import MemoryCopy, copy_owner, owners_of

__all__ = ["copy_memory"]


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
