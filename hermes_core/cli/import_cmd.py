"""``hermes-core import SOURCE ...``: bring another agent's data into this home.

The kernel owns the group and nothing under it: each importer is a plugin command registered with
``register(command, group="import")`` (the ``register_commands`` hook), so ``import hermes``
comes from the Hermes bridge distribution. Listing or running an importer loads the plugins.
"""

from __future__ import annotations

import click

__all__ = ["import_group"]


class _PluginSubcommands(click.Group):
    """A kernel group whose sub-commands are the plugins' (``host.subcommands[name]``)."""

    def _table(self, ctx: click.Context) -> dict[str, tuple[click.Command, str]]:
        key = f"hermes_core.subcommands.{self.name}"
        table: dict[str, tuple[click.Command, str]] | None = ctx.meta.get(key)
        if table is None:
            from ._common import load_host

            host = load_host(tolerate_bad_config=True, warn_config=False)
            table = ctx.meta[key] = dict(host.subcommands.get(str(self.name), {}))
        return table

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._table(ctx))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self._table(ctx).get(cmd_name)
        return None if found is None else found[0]

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            known = ", ".join(self.list_commands(ctx)) or "none (no importer plugin is installed)"
            raise click.UsageError(
                f"no importer {name!r}; the installed ones are: {known}. Importers come with "
                "plugins: 'import hermes' with hermes-core-hermes-compat "
                "(pip install hermes-core-hermes-compat)", ctx)
        return super().resolve_command(ctx, args)


@click.group("import", cls=_PluginSubcommands)
def import_group() -> None:
    """Bring another agent's history and memory into this home (importers are plugins)."""
