"""Copying the skill library between backends (``hermes-core storage migrate``).

Each skill travels as its file's exact bytes (an unusable one too: it stays listed as unusable,
with its reason). A name the target already holds is left alone; if its text differs it is
reported, never overwritten. Running it again copies nothing twice.
"""

from __future__ import annotations

from .library import SkillError, SkillLibrary

__all__ = ["copy_skills"]


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
