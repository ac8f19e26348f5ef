"""Skills: procedural memory in ``$HERMES_CORE_HOME/skills/<name>.md``.

A memory provider (on by default: it is in the default ``memory.providers``) because that is the
kind whose ``system_prompt_block`` the kernel puts into the prompt, frozen for the session, and
whose instance offers tools through ``get_tools``. The block lists each usable skill's name and
description; the provider freezes it per session id, exactly like the file memory's snapshot, so a
skill created mid-session shows up from the next session (or the next compaction) on and the
prompt stays byte-identical meanwhile.

The ``skill_manage`` tool carries a :class:`hermes_core.kinds.Curation` of role ``procedures``: the
kernel reminds the model, every ``skills.creation_nudge_interval`` tool-loop iterations without
a call of it, that it can save a procedure.

User documentation: ``docs/skills.md``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext, Tool
from hermes_core.storage import resolve_storage_url
from hermes_core.storage.erasure_log import squash
from hermes_core.types import ForgetReport, Session, ToolContext

from .library import Skill, SkillError, SkillLibrary
from .tools import build_tools

#: sessions whose erasure-log mark is kept (the oldest is dropped past this)
_MARKS = 512


def _mentions(subject: str) -> Callable[[str], bool]:
    """Whether a text mentions ``subject`` as forget matches (case, runs of whitespace)."""
    needle = squash(subject)
    return lambda text: bool(needle) and needle in squash(text)

if TYPE_CHECKING:
    from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide
    from hermes_core.storage.url import StorageURL

__all__ = ["Skill", "SkillError", "SkillLibrary", "SkillsConfig", "SkillsProvider",
           "copy_storage", "library_at", "open_library", "register_memory_providers", "render_block"]


class SkillsConfig(BaseModel):
    """The ``skills`` section of config.yaml."""

    model_config = ConfigDict(extra="forbid")

    #: remind the model it can save a procedure after this many tool-loop iterations without
    #: using ``skill_manage`` (0: never)
    creation_nudge_interval: int = Field(default=15, ge=0, le=10_000)
    #: the largest skill file, in characters
    max_chars: int = Field(default=20_000, ge=200, le=1_000_000)


_HEADER = (
    "Skills are procedures you saved earlier. Before a task one of them covers, load it with "
    "skill_view and follow it; after a task worth repeating, save or improve one with "
    "skill_manage."
)


def render_block(skills: list[Skill]) -> str | None:
    """The prompt block for the usable ``skills`` (``None`` when there are none)."""
    usable = [s for s in skills if s.error is None]
    if not usable:
        return None
    lines = [f"- {s.name}: {s.description}" for s in usable]
    return _HEADER + "\n" + "\n".join(lines)


class SkillsProvider(MemoryProvider):
    """Lists the skills in the system prompt and offers the skill tools."""

    name = "skills"
    Config = SkillsConfig
    description = "procedures saved as skills/<name>.md, listed in the prompt, skill tools"

    config: SkillsConfig

    def __init__(self, config: SkillsConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        storage = getattr(context.config, "storage", None)
        self.library = open_library(context.home, config, getattr(storage, "url", None))
        self._tools = [dataclasses.replace(t, handler=self._checked(t.handler))
                       if t.name == "skill_manage" else t
                       for t in build_tools(self.library,
                                            nudge_interval=config.creation_nudge_interval)]
        self._lock = threading.Lock()
        self._frozen: tuple[str, str | None] | None = None  # (session id, block)
        from hermes_core.storage.erasure_log import ErasureLog

        #: forgets noted while a session's turns are in flight (see _forget_late)
        self._erasures = ErasureLog(context.home,
                                    resolve_storage_url(getattr(storage, "url", None)))
        #: session id -> the erasure log's settled mark when its listing was frozen
        self._marks: OrderedDict[str, int] = OrderedDict()
        #: sessions whose mark is renewed at their next listing (an erasure came since)
        self._reload: set[str] = set()

    def _checked(self, handler: Callable[[Any, ToolContext], Any]
                 ) -> Callable[[Any, ToolContext], Any]:
        """``skill_manage``, then the check of forgets noted since the session started."""
        def manage(args: Any, context: ToolContext) -> Any:
            out = handler(args, context)
            try:
                self._forget_late(context.session, args)
            except Exception as exc:  # the write stands: say so, never fail the tool call
                self.context.logger.error("skills: re-applying forgets to a write failed: %s",
                                          exc)
            return out
        return manage

    def _forget_late(self, session: Session | None, args: Any) -> None:
        """A forget noted after ``session``'s listing was frozen (its turns loaded before it)
        may not have reached what they still hold: a skill this session saves that mentions the
        subject is forgotten again (as the session archive does with what such a turn writes)."""
        if session is None:
            return
        with self._lock:
            mark = self._marks.get(session.id)
            if mark is None:  # a review's session: the conversation it works for
                owner = session.attributes.get("origin_session_id") or session.parent_session_id
                mark = self._marks.get(str(owner)) if owner else None
        if mark is None:
            return
        notes = [n for n in self._erasures.since(mark) if n.what == "forget" and n.scope == "all"]
        texts = [str(v) for v in (args.model_dump() if hasattr(args, "model_dump")
                                  else dict(args)).values() if isinstance(v, str)]
        for note in notes:
            subject = note.find_in(*texts)
            if subject is not None:
                names = self.library.forget_matching(_mentions(subject), dry_run=False)
                self.context.logger.info("skills: a skill saved by session %s mentioned a subject "
                                         "forgotten meanwhile; forgotten again (%s)", session.id,
                                         ", ".join(names))

    @hookimpl
    def system_prompt_block(self, session: Session) -> str | None:
        with self._lock:
            if self._frozen is None or self._frozen[0] != session.id:
                try:
                    skills = self.library.all()
                except SkillError as exc:
                    self.context.logger.warning("skills: %s", exc)
                    skills = []
                for skill in skills:
                    if skill.error is not None:
                        self.context.logger.warning("skills: %s left out of the prompt: %s",
                                                    skill.path.name, skill.error)
                self._frozen = (session.id, render_block(skills))
                if session.id not in self._marks or session.id in self._reload:
                    self._reload.discard(session.id)
                    self._mark(session.id)
            return self._frozen[1]

    def _mark(self, session_id: str) -> None:
        """Note the erasure log's settled mark for ``session_id`` (called with the lock held)."""
        try:
            self._marks[session_id] = self._erasures.settled()
        except Exception as exc:
            self.context.logger.error("skills: cannot read the erasure log (%s): a forget landing "
                                      "during this session's turns may be saved again", exc)
        while len(self._marks) > _MARKS:
            self._marks.popitem(last=False)

    @hookimpl
    def on_erasure(self, generation: int) -> None:
        """Something was erased (maybe by another process's ``forget``): the frozen listing may
        name a deleted skill, and a rebuilt conversation keeps its session id; it is read
        afresh at the next prompt."""
        with self._lock:
            self._frozen = None
            # a conversation rebuilt after it takes a new mark at its next listing; a turn still
            # in flight keeps its own until then
            self._reload = set(self._marks)

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return list(self._tools)

    @hookimpl
    def shutdown(self) -> None:
        self._erasures.close()

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete every skill file whose text mentions ``subject`` (the whole skill)."""
        if scope != "all":
            return ForgetReport(self.name, dry_run=dry_run, cannot_delete=(
                "skills are shared by every user of this home; forget with scope 'all'"))
        needle = squash(subject)  # case and runs of whitespace ignored
        names = self.library.forget_matching(lambda text: bool(needle) and needle in squash(text),
                                             dry_run=dry_run)
        return ForgetReport(self.name, matched=len(names), deleted=0 if dry_run else len(names),
                            dry_run=dry_run, items=[f"skill {n} ({n}.md)" for n in names])


def open_library(home: Path, config: SkillsConfig, storage_url: str | None = None
                 ) -> SkillLibrary:
    """The library ``storage.url`` selects: the ``skills`` table of that database, else the
    home's ``skills/`` folder; never a silent fallback."""
    return library_at(home, config, resolve_storage_url(storage_url))


def library_at(home: Path, config: SkillsConfig, url: StorageURL | None) -> SkillLibrary:
    """The library in the database at ``url``, or the home's ``skills/`` folder when it is None
    (named by the caller: ``$HERMES_CORE_STORAGE_URL`` is not consulted)."""
    if url is not None:
        from .pg_library import PgSkillLibrary

        return PgSkillLibrary(url, max_chars=config.max_chars)
    return SkillLibrary(home / "skills", max_chars=config.max_chars)


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    register(SkillsProvider)


@hookimpl
def register_commands(register: Any) -> None:
    """``hermes-core skills ...``: this plugin's commands (see :mod:`.commands`)."""
    from .commands import skills

    register(skills)


@hookimpl
def copy_storage(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    """``storage migrate``: every skill, byte for byte (see :mod:`.transfer`)."""
    from .transfer import copy_library

    return copy_library(source, target)
