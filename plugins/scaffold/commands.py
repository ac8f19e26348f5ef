"""``hermes-core plugins new NAME --kind KIND``: create a plugin package."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["new"]


@click.command("new")
@click.argument("name")
@click.option("--kind", type=click.Choice(["memory", "context-engine", "tool", "platform"]),
              required=True, help="What the plugin provides.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=".",
              show_default=True, help="Where to create the package folder.")
def new(name: str, kind: str, directory: str) -> None:
    """Create a plugin package NAME: pyproject, module, config model, tests, README."""
    from .build import scaffold

    root = scaffold(name, kind, Path(directory))
    click.echo(f"Created {root}. Next:\n  cd {root}\n  hermes-core plugins install -e .\n"
               "  pip install pytest jsonschema && pytest")
