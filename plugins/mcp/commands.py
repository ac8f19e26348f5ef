"""``hermes-core mcp``: serve the memory stack over MCP, and check the configured MCP servers."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
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
              help="HTTP: the address to bind (anything but loopback is reachable from the network).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="HTTP: the port (0 picks a free one; the URL is printed on stderr).")
@click.option("--uds", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTTP: serve on this Unix domain socket (mode 0600) instead of a TCP port.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False), default=None,
              help="What is logged on stderr (INFO adds one line per HTTP request). Default WARNING.")
def serve(transport: str, bind: str, port: int, uds: Path | None, log_level: str | None) -> None:
    """Serve the configured memory providers' tools, recall, remember, memory files and skills.

    Over HTTP every request needs 'Authorization: Bearer <token>': the token is
    $HERMES_CORE_MCP_TOKEN, or the home's mcp-token file, created (0600) and shown once on the
    first start. See docs/mcp.md.
    """
    from .credential import CredentialError, resolve
    from .serve import ServeError, run_http, run_stdio
    from .server import StackServer

    _need_sdk()
    if log_level is not None:
        _log_to_stderr(log_level.upper())
    host = load_host()
    settings = _settings(host)
    fresh: str | None = None
    if transport == "http":
        try:
            credential, fresh = resolve(host.home, settings.token_env)
        except CredentialError as exc:
            raise click.ClickException(str(exc)) from None
    activate_served_providers(host)
    try:
        stack = StackServer(host, transport=transport, max_conversations=settings.max_sessions)
    except Exception as exc:
        host.shutdown()
        raise click.ClickException(str(exc)) from None

    def announce(url: str) -> None:
        click.echo(f"hermes-core mcp: serving on {url}", err=True)
        if fresh is not None:
            click.echo(client_snippet(url, fresh, host.home), err=True)

    try:
        if transport == "http":
            run_http(stack, settings, credential, announce, host=bind, port=port, uds=uds,
                     log_level=(log_level or "warning").lower())
        else:
            run_stdio(stack)
    except KeyboardInterrupt:
        pass
    except ServeError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {uds or f'{bind}:{port}'}: {exc}") from None
    finally:
        stack.close()
        host.shutdown()


def client_snippet(url: str, token: str, home: Path) -> str:
    """What to paste into an MCP client's configuration (shown once, with a new token)."""
    from .credential import TOKEN_FILE

    entry: dict[str, Any] = {"type": "http", "url": url,
                             "headers": {"Authorization": f"Bearer {token}"}}
    if url.startswith("unix:"):
        entry["url"] = "http://localhost/mcp"
        entry["socket"] = url[len("unix:"):]
    paste = json.dumps({"mcpServers": {"hermes-core": entry}}, indent=2)
    return (f"hermes-core mcp: a new bearer token was written to {home / TOKEN_FILE} (mode 0600); "
            "it is shown this once. Every HTTP request must carry it. For a client's MCP "
            f"configuration (e.g. .mcp.json):\n{paste}")


@mcp_group.command("token")
@click.option("--rotate", is_flag=True,
              help="Replace the token with a new one; a running server refuses the old one within "
                   "a second.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def token(rotate: bool, as_json: bool) -> None:
    """Where the HTTP server's bearer token comes from; --rotate replaces (revokes) it."""
    from .credential import TOKEN_FILE, CredentialError
    from .credential import resolve as resolve_token
    from .credential import rotate as rotate_token

    host = load_host()
    settings = _settings(host)
    path = host.home / TOKEN_FILE
    from_env = bool(os.environ.get(settings.token_env, "").strip())
    shown: str | None = None
    if rotate:
        try:
            shown = rotate_token(host.home)
        except CredentialError as exc:
            raise click.ClickException(str(exc)) from None
    problem = None
    if path.exists() or from_env:
        try:
            resolve_token(host.home, settings.token_env)
        except CredentialError as exc:
            problem = str(exc)
    source = f"environment variable {settings.token_env}" if from_env else str(path)
    if as_json:
        echo_json({"source": source, "file": str(path), "file_exists": path.exists(),
                   "rotated": rotate, "problem": problem,
                   **({"token": shown} if shown is not None else {})})
    else:
        click.echo(f"the token comes from: {source}"
                   + ("" if from_env or path.exists() else
                      " (not created yet: the first 'mcp serve --transport http' creates it)"))
        if from_env and rotate:
            click.echo(f"note: {settings.token_env} is set, so servers use it, not the new file")
        if shown is not None:
            click.echo(f"new token (shown this once): {shown}")
        if problem:
            click.echo(f"problem: {problem}", err=True)
    if problem:
        sys.exit(1)


def _log_to_stderr(level: str) -> None:
    root = logging.getLogger()
    for handler in root.handlers:  # the terminal's handler (set up by the CLI at WARNING)
        handler.setLevel(level)
    logging.getLogger("hermes_core").setLevel(level)


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
