"""The skill tools: ``skills_list``, ``skill_view`` and ``skill_manage`` (create, patch)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.errors import ToolError
from hermes_core.kinds import Curation, Tool
from hermes_core.types import ToolContext

from .library import SkillError, SkillLibrary

__all__ = ["SKILL_NUDGE", "build_tools"]

#: the reminder the kernel adds to a tool result after ``skills.creation_nudge_interval``
#: tool-loop iterations without a ``skill_manage`` call
SKILL_NUDGE = (
    "[Reminder: if the work so far took several steps, trial and error or a correction from the "
    "user, and is likely to come up again, consider saving the procedure with skill_manage "
    "once the task is done.]"
)


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The skill's name, as listed.")


class _Manage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["create", "patch"] = Field(
        description="create: a new skill; patch: replace one exact passage of an existing one."
    )
    name: str = Field(description="Lowercase letters, digits, '-' or '_' (also the file name).")
    description: str | None = Field(
        default=None, description="create: one line saying when the skill applies.")
    body: str | None = Field(default=None, description="create: the procedure, in Markdown.")
    old_text: str | None = Field(
        default=None, description="patch: a passage of the skill, quoted exactly, occurring once.")
    new_text: str | None = Field(default=None, description="patch: what replaces old_text.")


_MANAGE_DESCRIPTION = """\
Save a reusable procedure as a skill, or improve one. Skills are listed (name and description) \
in the system prompt of every later session and loaded with skill_view.
WHEN: after finishing a task that took several steps, trial and error, or a user's correction, \
and that is likely to come up again. SKIP: one-off tasks and facts (use the memory tool for facts).
create: name, description (when to use it), body (the steps, with the commands and pitfalls). \
patch: fix or extend an existing skill by replacing one exact passage (old_text -> new_text)."""


def build_tools(library: SkillLibrary, *, nudge_interval: int = 15) -> list[Tool]:
    """The three tools over ``library``; ``skill_manage`` asks the kernel for a reminder every
    ``nudge_interval`` tool-loop iterations without a call of it (0: never)."""

    def list_skills(_args: _NoArgs, _context: ToolContext) -> dict[str, Any]:
        try:
            skills = library.all()
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        return {"skills": [s.to_dict() for s in skills if s.error is None],
                "unusable": [s.to_dict() for s in skills if s.error is not None]}

    def view(args: _View, _context: ToolContext) -> dict[str, Any]:
        try:
            return library.get(args.name).to_dict(body=True)
        except SkillError as exc:
            raise ToolError(str(exc)) from None

    def manage(args: _Manage, _context: ToolContext) -> dict[str, Any]:
        try:
            if args.action == "create":
                skill = library.create(args.name, args.description or "", args.body or "")
                message = f"Skill {skill.name!r} created."
            else:
                if args.new_text is None:
                    raise SkillError("'new_text' is required for patch (it may be empty)")
                skill = library.patch(args.name, args.old_text or "", args.new_text)
                message = f"Skill {skill.name!r} patched."
        except SkillError as exc:
            return {"success": False, "error": str(exc)}
        return {"success": True, "done": True, "message": message,
                "note": "Saved. It is listed in the system prompt from the next session on."}

    return [
        Tool("skills_list", "List your saved skills (name and description), and any unusable "
             "skill files with the reason.", list_skills, input_model=_NoArgs, parallel_safe=True),
        Tool("skill_view", "Load a saved skill's full procedure by name before doing a task it "
             "covers.", view, input_model=_View, parallel_safe=True),
        Tool("skill_manage", _MANAGE_DESCRIPTION, manage, input_model=_Manage,
             curation=Curation(role="procedures", nudge_interval=nudge_interval, nudge=SKILL_NUDGE)),
    ]
