"""The skills of a Hermes home (``skills/**/SKILL.md``) into hermes-core's skills.

Each user skill is created through the tool whose :class:`~hermes_core.kinds.Curation` role is
``procedures`` (``skill_manage`` of the skills provider), with its name, its description and its
body (the text after the front matter), so the library's own checks apply. A skill of that name
already there is left as it is (a second import adds nothing). Left out, and reported: the skills
Hermes ships and seeds itself (listed in ``skills/.bundled_manifest``), supporting files
(``references/``, ``scripts/``, ...), and a skill the library refuses, with its reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.kinds import Tool
from hermes_core.toolrun import ToolRouter

from .memory import call_tool

__all__ = ["HermesSkill", "SkillsImport", "import_skills", "read_skills"]

#: folders Hermes' skill scan never enters (agent/skill_utils.EXCLUDED_SKILL_DIRS), and a
#: skill's support folders, which hold its files, not skills (SKILL_SUPPORT_DIRS)
_EXCLUDED = frozenset(("venv", "node_modules", "site-packages", "__pycache__"))
_SUPPORT = frozenset(("references", "templates", "assets", "scripts"))
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.DOTALL)


@dataclass
class HermesSkill:
    name: str
    description: str
    body: str
    path: Path
    extra_files: int = 0


@dataclass
class SkillsImport:
    created: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    bundled: int = 0
    #: {"skill", "reason"} of each skill not brought
    left: list[dict[str, str]] = field(default_factory=list)
    #: what was brought only in part (supporting files), one line each
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"created": self.created, "already_there": self.already,
                "bundled_skipped": self.bundled, "left": self.left, "notes": self.notes}


def _bundled(root: Path) -> set[str]:
    try:
        lines = (root / ".bundled_manifest").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    return {line.partition(":")[0].strip() for line in lines if line.strip()}


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower()).strip("-_")
    return slug[:64]


def read_skills(root: Path, out: SkillsImport) -> list[HermesSkill]:
    """The user skills under ``root`` (bundled ones are counted in ``out.bundled``)."""
    if not root.is_dir():
        return []
    import yaml

    bundled = _bundled(root)
    skills: list[HermesSkill] = []
    for path in _skill_files(root):
        rel = path.parent.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8-sig")  # without a byte-order mark
        except (OSError, UnicodeDecodeError) as exc:
            out.left.append({"skill": str(rel), "reason": f"{path} cannot be read: {exc}"})
            continue
        match = _FRONT.match(text)
        meta: Any = {}
        body = text
        if match:
            try:
                meta = yaml.safe_load(match.group(1)) or {}
            except yaml.YAMLError:
                meta = {}
            body = match.group(2)
        if not isinstance(meta, dict):
            meta = {}
        raw_name = str(meta.get("name") or path.parent.name)
        if raw_name in bundled or path.parent.name in bundled:
            out.bundled += 1
            continue
        description = " ".join(str(meta.get("description") or "").split())
        extra = sum(1 for p in path.parent.rglob("*") if p.is_file() and p != path)
        skills.append(HermesSkill(_slug(raw_name), description, body.strip(), path, extra))
    return skills


def _skill_files(root: Path) -> list[Path]:
    """The ``SKILL.md`` files under ``root`` as Hermes finds them: links followed (a skill folder
    may link to a checkout elsewhere; each real folder walked once), hidden and dependency
    folders and a skill's support folders skipped."""
    found: list[Path] = []
    seen: set[str] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        has_skill = "SKILL.md" in files and real not in seen
        dirs[:] = [] if real in seen else [
            d for d in dirs if not d.startswith(".")  # hub caches, quarantine, archives
            and d not in _EXCLUDED and not (has_skill and d in _SUPPORT)]
        seen.add(real)
        if has_skill:
            found.append(Path(folder) / "SKILL.md")
    return sorted(found)


def import_skills(tool: tuple[Tool, str] | None, root: Path, *, dry_run: bool) -> SkillsImport:
    out = SkillsImport()
    skills = read_skills(root, out)
    if skills and tool is None and not dry_run:
        out.left += [{"skill": s.name, "reason": "no active provider offers a skills tool (add "
                      "skills to memory.providers)"} for s in skills]
        return out
    for n, skill in enumerate(skills, 1):
        if skill.extra_files:
            out.notes.append(
                f"skill {skill.name!r}: its {skill.extra_files} supporting file(s) beside "
                f"{skill.path.name} are not imported (only the procedure is); copy them by hand "
                f"from {skill.path.parent}")
        if dry_run:
            out.created.append(skill.name)
            continue
        assert tool is not None
        description = skill.description or f"Imported from Hermes: {skill.name}"
        answer = call_tool(ToolRouter({tool[0].name: tool}), tool[0].name, {
            "action": "create", "name": skill.name, "description": description,
            "body": skill.body}, f"hermes-import-skill-{n}")
        if answer.get("success"):
            out.created.append(skill.name)
        elif "already exists" in str(answer.get("error", "")):
            out.already.append(skill.name)
        else:
            out.left.append({"skill": skill.name, "reason": str(answer.get("error") or answer)})
    return out
