"""``hermes-core skills``: list and show the saved skills (``$HERMES_CORE_HOME/skills/<name>.md``).

A thin layer over :class:`hermes_core.plugins.memory.skills.SkillLibrary`, with the limits of the
``skills`` config section. Unusable files are listed with the reason, never hidden.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hermes_core.commands import echo_json, warn

if TYPE_CHECKING:
    from . import SkillLibrary

__all__ = ["skills"]


def _library() -> SkillLibrary:
    from hermes_core.config import load_config, validate_section
    from hermes_core.paths import home_dir

    from . import SkillsConfig, open_library

    config = load_config()
    settings = validate_section(config, "skills", SkillsConfig, plugin="skills")
    return open_library(home_dir(), settings, config.core.storage.url)


@click.group()
def skills() -> None:
    """Procedures the agent saved as skills, listed in its system prompt."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def list_skills(as_json: bool) -> None:
    """List every skill with its description; unusable files are shown with the reason."""
    library = _library()
    found = library.all()
    if as_json:
        echo_json([s.to_dict() for s in found])
        return
    if not found:
        click.echo(f"No skills yet ({library.location}).")
        return
    width = max(len(s.name) for s in found)
    for skill in found:
        if skill.error is None:
            click.echo(f"{skill.name:<{width}}  {skill.description}")
        else:
            click.echo(f"{skill.name:<{width}}  (unusable: {skill.error})")
    broken = sum(1 for s in found if s.error is not None)
    if broken:
        warn(f"{broken} skill file(s) cannot be used and are left out of the system prompt; "
             "fix them or move them out of the folder")


@skills.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show(name: str, as_json: bool) -> None:
    """Print the skill NAME: its description and procedure."""
    skill = _library().get(name)  # a SkillError (unknown, unusable) is printed without traceback
    if as_json:
        echo_json(skill.to_dict(body=True))
        return
    click.echo(f"{skill.name}: {skill.description}\n({skill.path})\n")
    click.echo(skill.body)
