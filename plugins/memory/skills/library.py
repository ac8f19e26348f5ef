"""Skill files on disk: ``$HERMES_CORE_HOME/skills/<name>.md``, parsed, checked, created, patched.

A skill is a Markdown file whose front matter names it and says when it applies::

    ---
    name: deploy-staging
    description: Deploy the web app to the staging cluster and check it came up
    ---
    1. ...

Everything a skill holds reaches the model (the description through the system prompt, the body
through ``skill_view``), so the same rules as the file memory apply: new text is threat-scanned
before it is written, files edited by hand are scanned again when read, and every write goes
through the file memory's atomic-write helper under its lock (a reader sees the old file or the
new one, never a mix; two writers never interleave).

A file that cannot be used (unreadable, broken front matter, a name that does not match the file,
a blocked pattern) is reported as a :class:`Skill` with ``error`` set: listings show it with the
reason, prompt assembly leaves it out, and nothing raises.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Reused on purpose, not copied: the same scanner and the same durable write as MEMORY.md.
from hermes_core import threats
from hermes_core.atomic import LockUnavailable, atomic_write, locked
from hermes_core.errors import HermesCoreError
from hermes_core.private import PRIVATE_FILE_MODE, private_dir

__all__ = [
    "DESCRIPTION_LIMIT",
    "NAME_RE",
    "Skill",
    "SkillError",
    "SkillLibrary",
    "parse_skill",
    "render_skill",
]

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: the longest description kept; the prompt lists every skill, so descriptions must stay short
DESCRIPTION_LIMIT = 300
_FENCE = "---"


class SkillError(HermesCoreError):
    """A skill request was refused; the message says why and what to do."""


@dataclass(slots=True)
class Skill:
    """One skill file, parsed (or the reason it could not be)."""

    name: str  #: from the front matter, or the file stem when the front matter is unusable
    path: Path
    description: str = ""
    body: str = ""
    error: str | None = None
    #: other front-matter keys, kept as written
    extra: dict[str, Any] | None = None

    def to_dict(self, *, body: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description,
                               "path": str(self.path)}
        if self.error:
            out["error"] = self.error
        if body:
            out["body"] = self.body
        return out


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SkillError(
            f"invalid skill name {name!r}: use 1-64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit (it is also the file name)"
        )
    return name


def _scan(label: str, text: str) -> None:
    finding = threats.scan(text)
    if finding is not None:
        raise SkillError(f"{label}: {finding.message()}")


def _split(text: str) -> tuple[str, str]:
    """(front matter, body) of a skill file; SkillError when there is no closed front matter."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].strip() != _FENCE:
        raise SkillError("no front matter: the file must start with a '---' line")
    for index in range(1, len(lines)):
        if lines[index].strip() == _FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1:]).strip("\n")
    raise SkillError("the front matter is not closed: add a '---' line after it")


def parse_skill(text: str, path: Path) -> Skill:
    """Parse a skill file's text; problems are reported in ``error``, never raised."""
    import yaml

    stem = path.stem
    try:
        head, body = _split(text)
        try:
            # libyaml's loader when PyYAML has it: ~10x faster, and a prompt lists every skill
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            meta = yaml.load(head, Loader=loader) if head.strip() else None  # a safe loader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark else ""
            raise SkillError(f"the front matter is not valid YAML{where}: "
                             f"{getattr(exc, 'problem', None) or exc}") from None
        if not isinstance(meta, dict):
            raise SkillError("the front matter must be a mapping with 'name' and 'description'")
        name, description = meta.get("name"), meta.get("description")
        if not isinstance(name, str) or not name.strip():
            raise SkillError("the front matter has no 'name'")
        name = name.strip()
        _check_name(name)
        if name != stem:
            raise SkillError(f"the front matter names {name!r} but the file is {path.name}; "
                             f"rename one so they match")
        if not isinstance(description, str) or not description.strip():
            raise SkillError("the front matter has no 'description' (one line: when to use it)")
        description = " ".join(description.split())
        extra = {str(k): v for k, v in meta.items() if k not in ("name", "description")}
        # a hand-edited file is scanned again: it is headed for the prompt and the conversation
        _scan("description", description)
        _scan("body", body)
    except SkillError as exc:
        return Skill(stem, path, error=str(exc))
    return Skill(name, path, description[:DESCRIPTION_LIMIT], body, extra=extra or None)


def render_skill(name: str, description: str, body: str, extra: dict[str, Any] | None = None) -> str:
    """The text of a skill file."""
    import yaml

    meta: dict[str, Any] = {"name": name, "description": description, **(extra or {})}
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000).strip()
    return f"{_FENCE}\n{head}\n{_FENCE}\n{body.strip()}\n"


#: one stored skill: (name, a key that changes with its content, its bytes, or why unreadable)
Row = tuple[str, object, "Callable[[], bytes]"]


class SkillLibrary:
    """The skills, with their rules (names, limits, threat scan, parsing) written once.

    This class keeps them as files of a folder: reads take no lock (writes replace files
    atomically), writes take the folder's lock. :class:`~.pg_library.PgSkillLibrary` keeps them
    as rows; a medium supplies :meth:`_rows`, :meth:`_insert`, :meth:`_edit` and
    :meth:`forget_matching`."""

    def __init__(self, directory: Path, *, max_chars: int = 20_000) -> None:
        self.directory = Path(directory)
        self.max_chars = max_chars
        # name -> (content key, parsed): prompt assembly re-reads only skills that changed
        self._cache: dict[str, tuple[object, Skill]] = {}
        self._cache_lock = threading.Lock()

    def path(self, name: str) -> Path:
        return self._where(_check_name(name))

    def _where(self, name: str) -> Path:
        """The file of a skill (its name for messages and listings)."""
        return self.directory / f"{name}.md"

    @property
    def location(self) -> str:
        """Where the skills are kept, for messages (the folder here)."""
        return str(self.directory)

    # ------------------------------------------------------------------ the medium (files)

    def _rows(self, name: str | None) -> list[Row]:
        """The skill ``name`` ([] when absent), or every skill by name when None."""
        if name is not None:
            paths = [self.path(name)]
        else:
            try:
                paths = sorted(Path(e.path) for e in os.scandir(self.directory)
                               if e.name.endswith(".md") and not e.name.startswith(".")
                               and e.is_file())
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise SkillError(f"cannot list {self.directory}: {exc.strerror or exc}") from None
        rows: list[Row] = []
        for path in paths:
            try:
                stat = path.stat()
            except OSError as exc:
                if name is not None and isinstance(exc, FileNotFoundError):
                    return []
                error = str(exc.strerror or exc)
            else:
                rows.append((path.stem, (stat.st_mtime_ns, stat.st_size), path.read_bytes))
                continue
            rows.append((path.stem, None, _unreadable(error)))
        return rows

    def _insert(self, name: str, data: bytes, *, note: str = "") -> bool:
        """Store ``data`` as ``name`` unless the name is taken; True when stored."""
        path = self.path(name)
        with self._write_lock():
            if path.exists():
                return False
            self._write(path, data, note)
        return True

    @contextlib.contextmanager
    def _edit(self, name: str) -> Iterator[tuple[Row | None, Callable[[bytes], None]]]:
        """Under the write lock: the skill (None when absent) and how to replace its bytes."""
        path = self.path(name)
        with self._write_lock():
            rows = self._rows(name)
            yield (rows[0] if rows else None), lambda new: self._write(
                path, new, "; nothing was changed")

    def forget_matching(self, matches: Callable[[str], bool], *, dry_run: bool) -> list[str]:
        """Delete every skill whose text ``matches``, all of them or none (each is first
        renamed aside, then unlinked); the names of those found."""
        with self._write_lock():
            found = []
            for skill in self.all():
                try:
                    text = skill.path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                if matches(text):
                    found.append(skill.path)
            if dry_run or not found:
                return [p.stem for p in found]
            moved: list[tuple[Path, Path]] = []
            try:
                for path in found:
                    aside = path.with_name(f".{path.name}.forget")
                    os.replace(path, aside)
                    moved.append((path, aside))
            except OSError as exc:
                for path, aside in moved:
                    os.replace(aside, path)
                raise SkillError(f"cannot delete {path.name}: {exc.strerror or exc}; no skill "
                                 "was deleted") from None
            for _path, aside in moved:
                aside.unlink()
            return [p.stem for p in found]

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        try:
            private_dir(self.directory)
        except OSError as exc:
            raise SkillError(f"cannot create {self.directory}: {exc.strerror or exc}") from None
        # One lock for the folder (a hidden ".skills.lock").
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(locked(self.directory / ".skills"))
            except LockUnavailable as exc:
                raise SkillError(str(exc.strerror)) from None
            yield

    def _write(self, path: Path, data: bytes, note: str) -> None:
        try:
            atomic_write(path, data, mode=PRIVATE_FILE_MODE)
        except OSError as exc:
            raise SkillError(f"cannot write {path}: {exc.strerror or exc}{note}") from None

    # ------------------------------------------------------------------------------- reading

    def _skill(self, row: Row) -> Skill:
        """A stored skill, parsed (from the cache when its content did not change)."""
        name, key, read = row
        path = self._where(name)
        with self._cache_lock:
            cached = self._cache.get(name)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        try:
            text = read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return Skill(name, path, error=f"cannot read {path.name}: {exc}")
        skill = parse_skill(text, path)
        if skill.error is None and len(text) > self.max_chars:
            skill.error = (f"{path.name} has {len(text)} characters, over the limit of "
                           f"{self.max_chars} (skills.max_chars); shorten it")
        if key is not None:
            with self._cache_lock:
                self._cache[name] = (key, skill)
        return skill

    def all(self) -> list[Skill]:
        """Every skill, by name; broken ones carry ``error``."""
        return [self._skill(row) for row in self._rows(None)]

    def get(self, name: str) -> Skill:
        """The skill ``name``; SkillError when it does not exist or cannot be used."""
        rows = self._rows(_check_name(name))
        if not rows:
            known = ", ".join(s.name for s in self.all() if s.error is None) or "none"
            raise SkillError(f"there is no skill named {name!r}. Known skills: {known}")
        skill = self._skill(rows[0])
        if skill.error is not None:
            raise SkillError(f"skill {name!r} cannot be used: {skill.error}")
        return skill

    def raw(self) -> Iterator[tuple[str, bytes]]:
        """(name, exact bytes) of every skill, by name (``storage migrate``)."""
        for name, _key, read in self._rows(None):
            try:
                yield name, read()
            except OSError:
                continue

    # ------------------------------------------------------------------------------ writing

    def create(self, name: str, description: str, body: str) -> Skill:
        """Store a new skill; refuses an existing name, bad input and blocked content."""
        text = self._checked_new(name, description, body)
        if not self._insert(name, text.encode("utf-8"), note="; nothing was changed"):
            raise SkillError(f"a skill named {name!r} already exists; use action 'patch' to "
                             "change it, or pick another name")
        return self.get(name)

    def _checked_new(self, name: str, description: str, body: str) -> str:
        """The text of a new skill, after every check (name, description, body, scan, size)."""
        name = _check_name(name)
        description = " ".join((description or "").split())
        if not description:
            raise SkillError("'description' is required: one line saying when to use the skill")
        if len(description) > DESCRIPTION_LIMIT:
            raise SkillError(f"the description has {len(description)} characters; keep it under "
                             f"{DESCRIPTION_LIMIT} (it is listed in every system prompt)")
        if not (body or "").strip():
            raise SkillError("'body' is required: the steps of the procedure")
        _scan("description", description)
        _scan("body", body)
        text = render_skill(name, description, body)
        self._check_size(text)
        return text

    def patch(self, name: str, old_text: str, new_text: str) -> Skill:
        """Replace the one occurrence of ``old_text`` in the skill by ``new_text``; read and
        written under the write lock, so no write is lost."""
        if not old_text:
            raise SkillError("'old_text' is required: a part of the skill, quoted exactly, that "
                             "occurs once")
        name = _check_name(name)
        with self._edit(name) as (row, save):
            if row is None:
                self.get(name)  # raises, naming the known skills
                raise SkillError(f"there is no skill named {name!r}")  # pragma: no cover
            skill = self._skill((name, None, row[2]))
            if skill.error is not None:
                raise SkillError(f"skill {name!r} cannot be used: {skill.error}")
            text = row[2]().decode("utf-8")
            save(self._patched(name, text, old_text, new_text).encode("utf-8"))
        return self.get(name)

    def _patched(self, name: str, text: str, old_text: str, new_text: str) -> str:
        """``text`` with its one ``old_text`` replaced, checked like a new skill."""
        count = text.count(old_text)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise SkillError(f"old_text {where} in skill {name!r}; quote a part that occurs "
                             "exactly once (see skill_view)")
        new = text.replace(old_text, new_text, 1)
        _scan("new_text", new_text)
        parsed = parse_skill(new, self.path(name))
        if parsed.error is not None:  # a changed name is caught here: it must match the file
            raise SkillError(f"the patched skill would be broken ({parsed.error}); nothing "
                             "was changed")
        self._check_size(new)
        return new

    def put_raw(self, name: str, data: bytes) -> bool:
        """Store ``data`` as skill ``name`` unless it exists; True when stored (no checks
        beyond the name: a copied file is listed as unusable when it breaks a rule)."""
        return self._insert(_check_name(name), data)

    def _check_size(self, text: str) -> None:
        if len(text) > self.max_chars:
            raise SkillError(f"the skill would have {len(text)} characters, over the limit of "
                             f"{self.max_chars}; keep procedures short or split them")


def _unreadable(reason: str) -> Callable[[], bytes]:
    def read() -> bytes:
        raise OSError(reason)

    return read
