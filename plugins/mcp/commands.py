"""``hermes-core mcp``: serve the memory stack over MCP, and check the configured MCP servers."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from hermes_core.commands import echo_json, load_host

if TYPE_CHECKING:
    from hermes_core.host import PluginHost

    from .config import McpConfig

__all__ = ["mcp_group"]

log = logging.getLogger("hermes_core.plugins.mcp")
DEFAULT_PORT = 8765


def _settings(host: PluginHost) -> McpConfig:
    from .tools import McpTools

    config: McpConfig = host.plugin_config(McpTools)
    return config


def _need_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise click.ClickException("the 'mcp' package is not installed: install the extra with "
                                   "pip install 'hermes-core-kernel[mcp]'") from None


def activate_served_providers(host: PluginHost) -> list[str]:
    """Activate ``memory.providers`` except ``mcp`` (a server must not start its own MCP clients:
    one configured to run this server would start itself again). Returns the skipped problems."""
    from hermes_core.errors import HermesCoreError

    from .tools import McpTools

    problems: list[str] = []
    selected = list(enumerate(host.config.core.memory.providers))
    # registered in reverse so the hooks run in memory.providers order (as the kernel does)
    for i, name in reversed(selected):
        if name == McpTools.name:
            continue
        try:
            host.activate("memory-provider", name, config_key=f"memory.providers[{i}]")
        except HermesCoreError as exc:
            problems.append(str(exc))
            log.error("%s; serving without it", exc)
    return problems


@click.group("mcp")
def mcp_group() -> None:
    """Serve the memory stack over MCP; check the MCP servers of mcp.servers."""


@mcp_group.command("serve")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", "bind", default="127.0.0.1", show_default=True,
              help="HTTP: the address to bind (off loopback a bearer token is required).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="HTTP: the port (0 picks a free one; the URL is printed on stderr).")
def serve(transport: str, bind: str, port: int) -> None:
    """Serve the configured memory providers' tools, recall, remember, memory files and skills."""
    from .serve import ServeError, require_token, run_http, run_stdio
    from .server import StackServer

    _need_sdk()
    host = load_host()
    settings = _settings(host)
    token = None
    if transport == "http":
        try:
            token = require_token(bind, settings.token_env)
        except ServeError as exc:
            raise click.ClickException(str(exc)) from None
    activate_served_providers(host)
    try:
        stack = StackServer(host, transport=transport)
    except Exception as exc:
        host.shutdown()
        raise click.ClickException(str(exc)) from None
    try:
        if transport == "stdio":
            run_stdio(stack)
        else:
            run_http(stack, host=bind, port=port, token=token)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {bind}:{port}: {exc}") from None
    finally:
        stack.close()
        host.shutdown()


@mcp_group.command("servers")
@click.option("--json", "as_json", is_flag=True, help="Print the servers as JSON.")
def servers(as_json: bool) -> None:
    """Start each server of mcp.servers, list its tools, and say which failed (exit 1 if any)."""
    from .client import ClientManager
    from .tools import build_tools

    host = load_host()
    settings = _settings(host)
    manager = ClientManager(settings.servers, connect_timeout=settings.connect_timeout,
                            call_timeout=settings.call_timeout, log_dir=host.home / "logs")
    try:
        manager.start()
        tools, problems = build_tools(manager, settings)
        rows: list[dict[str, Any]] = manager.status()
    finally:
        manager.close()
    names = {t.name for t in tools}
    for row in rows:
        row["tools"] = [n for n in names if n.startswith(row["name"] + "__")]
        row["tools"].sort()
    if as_json:
        echo_json({"servers": rows, "problems": problems})
    else:
        if not rows:
            click.echo("no MCP servers configured (add them under mcp.servers in config.yaml)")
        for row in rows:
            mark = "ok  " if row["state"] == "running" else "FAIL"
            click.echo(f"[{mark}] {row['name']} ({row['transport']}): "
                       + (", ".join(row["tools"]) or "no tools") if row["state"] == "running"
                       else f"[{mark}] {row['name']} ({row['transport']}): {row['error']}")
        for problem in problems:
            click.echo(f"warning: {problem}", err=True)
    if any(r["state"] != "running" for r in rows):
        sys.exit(1)
