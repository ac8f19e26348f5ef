"""Copying the skill library between backends (``hermes-core storage migrate``).

Each skill travels as its file's exact bytes (an unusable one too: it stays listed as unusable,
with its reason). A name the target already holds is left alone; if its text differs it is
reported, never overwritten. Running it again copies nothing twice.
"""

from __future__ import annotations

from hermes_core.config import validate_section
from hermes_core.storage.transfer import CopyReport, StorageSide

from .library import SkillError, SkillLibrary

__all__ = ["copy_library", "copy_skills"]


def copy_library(source: StorageSide, target: StorageSide) -> CopyReport:
    """The ``copy_storage`` hook's work: ``source``'s skills into ``target`` (see above)."""
    from . import SkillsConfig, library_at

    settings = validate_section(source.config, "skills", SkillsConfig, plugin="skills")

    def library(side: StorageSide) -> SkillLibrary:
        return library_at(side.home, settings, side.url)

    source_library = library(source)
    copied: list[str] = []
    kept: list[str] = []
    if source.is_database or source_library.directory.is_dir():
        copied, kept = copy_skills(source_library, library(target))
    line = f"{len(copied)} skill(s) copied" + (
        f"; left as they are (the target holds other text under these names): {', '.join(kept)}"
        if kept else "")
    return CopyReport(copied={"skills": len(copied)}, skipped={"skills": len(kept)},
                      lines=[line], detail={"copied": copied, "kept": kept})


def copy_skills(source: SkillLibrary, target: SkillLibrary) -> tuple[list[str], list[str]]:
    """Copy every skill of ``source`` into ``target``; (names copied, names left alone)."""
    have = dict(target.raw())
    copied: list[str] = []
    kept: list[str] = []
    for name, data in source.raw():
        if name in have:
            if have[name] != data:
                kept.append(name)
            continue
        try:
            stored = target.put_raw(name, data)
        except SkillError:  # a file name that is no skill name: listed, never guessed at
            kept.append(name)
            continue
        (copied if stored else kept).append(name)
    return copied, kept
