"""``hermes-core inspect``: serve the page and the API; ``inspect token``: user-scoped tokens."""

from __future__ import annotations

import webbrowser

import click

from hermes_core.commands import echo_json, load_host

__all__ = ["inspect_group"]

DEFAULT_PORT = 8767
#: the home's bearer token comes from this variable first (as for 'mcp serve --transport http')
TOKEN_ENV = "HERMES_CORE_MCP_TOKEN"


def _need_fastapi() -> None:
    try:
        import fastapi  # noqa: F401
    except ImportError:
        raise click.ClickException("the inspector needs FastAPI: install the extra with "
                                   "pip install 'hermes-core-kernel[inspect]'") from None


@click.group("inspect", invoke_without_command=True)
@click.option("--host", "bind_host", default="127.0.0.1", show_default=True,
              help="The address to serve on (anything but loopback is reachable from the network).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="The port (0 picks a free one).")
@click.option("--user", metavar="KEY", default=None,
              help="The link opens the page scoped to this user key's memory and sessions only.")
@click.option("--no-browser", is_flag=True, help="Print the one-time link; do not open a browser.")
@click.pass_context
def inspect_group(ctx: click.Context, bind_host: str, port: int, user: str | None,
                  no_browser: bool) -> None:
    """See what the agent remembers: a local page and a REST API (docs/inspect.md).

    Prints a one-time link that opens the page (and sets its session cookie). API clients send
    'Authorization: Bearer <token>': the home's token ($HERMES_CORE_MCP_TOKEN or the mcp-token
    file, as for 'mcp serve --transport http'), or a user-scoped one from 'inspect token'.
    """
    if ctx.invoked_subcommand is not None:
        return
    _need_fastapi()
    from hermes_core.bearer import CredentialError, resolve
    from hermes_core.netaddr import is_loopback
    from hermes_core.users import UserKeyError, check_user_key

    from .api import build_app
    from .auth import Gate
    from .serve import bind, make_server
    from .service import Inspector

    if user is not None:
        try:
            user = check_user_key(user)
        except UserKeyError as exc:
            raise click.BadParameter(str(exc), param_hint="--user") from None
    host = load_host()
    try:
        credential, fresh = resolve(host.home, TOKEN_ENV)
    except CredentialError as exc:
        host.shutdown()
        raise click.ClickException(str(exc)) from None
    host.activate_memory_providers()
    inspector = Inspector(host)
    gate = Gate(credential, host.home)
    try:
        sock = bind(bind_host, port)
    except OSError as exc:
        inspector.close()
        host.shutdown()
        raise click.ClickException(f"cannot serve on {bind_host}:{port}: {exc}") from None
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    link = f"http://{shown}:{sock.getsockname()[1]}/login?code={gate.link_code(user)}"
    if not is_loopback(bind_host):
        click.echo(f"warning: {bind_host} is reachable from the network", err=True)
    if fresh is not None:
        click.echo(f"a new bearer token was written to {host.home / 'mcp-token'} (mode 0600); "
                   f"API clients send it as 'Authorization: Bearer <token>': {fresh}", err=True)
    click.echo(f"hermes-core inspect: open {link} (works once)")
    if not no_browser:
        webbrowser.open(link)
    try:
        make_server(build_app(inspector, gate), sock).run()
    except KeyboardInterrupt:
        pass
    finally:
        inspector.close()
        host.shutdown()


@inspect_group.command("token")
@click.option("--user", metavar="KEY", required=True, help="The user key the token sees.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def token(user: str, as_json: bool) -> None:
    """Issue a token that sees one user key's memory and sessions only (shown once)."""
    from hermes_core.paths import home_dir
    from hermes_core.users import UserKeyError

    from .auth import TOKENS_FILE, issue_user_token

    home = home_dir()
    try:
        value = issue_user_token(home, user)
    except (UserKeyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json({"user": user, "token": value, "file": str(home / TOKENS_FILE)})
    else:
        click.echo(f"token for user {user!r} (shown this once): {value}")
