"""``hermes-core mcp serve --transport http`` lets in only its credential holder.

The real command in a subprocess on 127.0.0.1 (or a Unix socket), raw HTTP requests (httpx) for
what an outsider would send, and the real mcp SDK client for what a configured client does. No
LLM is involved.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import httpx
from mcp_support.serving import TOKEN, WAIT, cli, connect, http_server

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CONFIG = """\
memory:
  providers: [file_memory, session_archive]
mcp:
  allowed_origins: ["http://localhost:3000"]
"""
#: one request per method an outsider could try, initialize and resources/read included
METHODS: list[tuple[str, dict[str, Any]]] = [
    ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "outsider", "version": "1"}}),
    ("tools/list", {}),
    ("tools/call", {"name": "memory", "arguments": {"action": "replace", "target": "memory",
                                                    "old_text": "secret", "content": "planted"}}),
    ("resources/list", {}),
    ("resources/read", {"uri": "hermes://memory/MEMORY.md"}),
    ("ping", {}),
    ("server/discover", {}),
]
BAD_CREDENTIALS: list[dict[str, str]] = [
    {},  # missing
    {"authorization": "Bearer wrong-token-0123456789abcdef"},
    {"authorization": f"Bearer {TOKEN[:-1]}"},  # one character short
    {"authorization": f"Bearer {TOKEN}x"},
    {"authorization": f"bearer {TOKEN} extra"},  # malformed
    {"authorization": "Bearer"},
    {"authorization": f"Basic {TOKEN}"},
]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "MEMORY.md").write_text("The secret deploy key is in the vault\n",
                                                  encoding="utf-8")
    (home / "config.yaml").write_text(CONFIG, encoding="utf-8")
    return home


def rpc(method: str, params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def sessions(home: Path) -> list[dict[str, Any]]:
    listed = cli(home, "sessions", "list", "--all", "--limit", "1000", "--json")
    assert listed.returncode == 0, listed.stderr
    return [s for s in json.loads(listed.stdout) if s.get("platform") == "mcp"]


def wait_for(what: str, probe: Any, bound: float = WAIT) -> Any:
    """Poll ``probe`` until it returns something true, at most ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {bound:g} s (last: {got!r})")
        time.sleep(0.1)


def test_every_method_without_the_token_is_401_and_the_client_with_it_works(home: Path) -> None:
    memory = home / "memories" / "MEMORY.md"
    before = memory.read_bytes()
    with http_server(home) as url:
        base = url.rsplit("/", 1)[0]
        for method, params in METHODS:
            for credential in BAD_CREDENTIALS:
                answer = httpx.post(url, json=rpc(method, params), headers={**ACCEPT, **credential},
                                    timeout=WAIT)
                assert answer.status_code == 401, (method, credential, answer.text)
                assert "bearer token" in answer.json()["error"]
                assert answer.headers["www-authenticate"].startswith("Bearer")
                assert "vault" not in answer.text
        assert httpx.get(url, headers=ACCEPT, timeout=WAIT).status_code == 401
        assert httpx.delete(url, timeout=WAIT).status_code == 401
        assert memory.read_bytes() == before, "an unauthenticated call changed the memory"
        # the health probe needs nothing and says nothing
        health = httpx.get(f"{base}/health", timeout=WAIT)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        # a web page's Origin: only the configured one gets past, even with the token
        authed = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
        init = rpc(*METHODS[0])
        page = httpx.post(url, json=init, headers={**authed, "origin": "http://localhost:1234"},
                          timeout=WAIT)
        assert page.status_code == 403 and "mcp.allowed_origins" in page.text
        allowed = httpx.post(url, json=init, headers={**authed, "origin": "http://localhost:3000"},
                             timeout=WAIT)
        assert allowed.status_code == 200, allowed.text

        async def client() -> tuple[list[str], str]:
            async with connect(url) as c:
                tools = [t.name for t in (await c.list_tools()).tools]
                read = await c.read_resource("hermes://memory/MEMORY.md")
                return tools, read.contents[0].text  # type: ignore[union-attr]

        tools, text = anyio.run(client)
        assert "memory" in tools and "recall" in tools and "vault" in text

        async def legacy_session() -> None:  # stateful: the client's DELETE ends its session
            async with connect(url, mode="legacy") as c:
                await c.call_tool("recall", {"query": "a legacy client's call"})

        anyio.run(legacy_session)
        wait_for("the DELETEd session ended",
                 lambda: [s for s in sessions(home) if s["end_reason"] == "user_exit"])


def test_a_generated_token_file_is_private_shown_once_and_rotation_revokes(home: Path) -> None:
    snippet: list[str] = []
    with http_server(home, token=None, snippet=snippet) as url:
        path = home / "mcp-token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        token = path.read_text(encoding="utf-8").strip()
        assert len(token) >= 32
        config = json.loads("".join(snippet[snippet.index("{\n"):]))
        entry = config["mcpServers"]["hermes-core"]
        assert entry == {"type": "http", "url": url,
                         "headers": {"Authorization": f"Bearer {token}"}}

        async def tools(with_token: str) -> list[str]:
            async with connect(url, with_token) as c:
                return [t.name for t in (await c.list_tools()).tools]

        assert "memory" in anyio.run(tools, token)
        # rotation while serving: the old token is refused without a restart, the new one works
        rotated = cli(home, "mcp", "token", "--rotate", "--json")
        assert rotated.returncode == 0, rotated.stderr
        fresh = json.loads(rotated.stdout)["token"]
        assert fresh != token and path.read_text(encoding="utf-8").strip() == fresh
        probe = rpc("tools/list", {})

        def refused(bearer: str) -> bool:
            return httpx.post(url, json=probe, timeout=WAIT, headers={
                **ACCEPT, "authorization": f"Bearer {bearer}"}).status_code == 401

        wait_for("the revoked token refused", lambda: refused(token))
        assert not refused(fresh)
        assert "memory" in anyio.run(tools, fresh)
    # shown once: a second start with the same file prints no token
    log: list[str] = []
    with http_server(home, token=None, log=log) as url:
        assert "memory" in anyio.run(tools, fresh)
    assert fresh not in "".join(log) and "new bearer token" not in "".join(log)


@pytest.mark.parametrize("problem", ["loose", "short", "spaces", "empty", "env"])
def test_an_unusable_token_refuses_to_start_naming_the_fix(home: Path, problem: str) -> None:
    path = home / "mcp-token"
    extra: dict[str, str] = {}
    path.write_text({"short": "abc123", "spaces": "a token with spaces in it, long enough",
                     "empty": "\n"}.get(problem, "a-good-long-token-0123456789abcdef") + "\n",
                    encoding="utf-8")
    os.chmod(path, 0o644 if problem == "loose" else 0o600)
    if problem == "env":
        extra["HERMES_CORE_MCP_TOKEN"] = "short"
    before = path.read_bytes()
    refused = cli(home, "mcp", "serve", "--transport", "http", "--port", "0", **extra)
    assert refused.returncode != 0
    expected = {"loose": f"chmod 600 {path}",
                "short": "at least 16 random characters; delete it", "spaces": "usable bearer token",
                "empty": "is empty; delete it", "env": "HERMES_CORE_MCP_TOKEN is too short"}[problem]
    assert expected in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert path.read_bytes() == before, "a refused start changed the token file"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="switching to another OS user needs root; this run is not root")
def test_a_second_os_user_cannot_read_the_token_file() -> None:
    try:
        other = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("there is no 'nobody' user to switch to")
    # a folder the other user may walk into, made for this test (no existing folder's mode is
    # changed): only the token file's own mode protects it
    base = Path(tempfile.mkdtemp(prefix="hermes-core-second-user-"))
    try:
        closed = [str(f) for f in base.parents if not os.stat(f).st_mode & 0o001]
        if closed:
            pytest.skip(f"the temporary folder's parents are closed to other users ({closed[0]}); "
                        "set TMPDIR to a folder they may traverse")
        os.chmod(base, 0o755)
        home = base / "shared-home"
        home.mkdir(mode=0o755)
        (home / "config.yaml").write_text(CONFIG, encoding="utf-8")
        created = cli(home, "mcp", "token", "--rotate", "--json")
        assert created.returncode == 0, created.stderr

        def read_as_other(path: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["cat", str(path)], user=other.pw_uid, group=other.pw_gid,
                                  extra_groups=[], capture_output=True, text=True, timeout=WAIT)

        # the control: the other user can walk to and read a world-readable file beside it
        # (the home's mode set again: the command above may have made it private)
        os.chmod(home, 0o755)
        control = home / "control.txt"
        control.write_text("readable\n", encoding="utf-8")
        os.chmod(control, 0o644)
        readable = read_as_other(control)
        assert readable.returncode == 0, readable.stderr
        denied = read_as_other(home / "mcp-token")
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
        assert json.loads(created.stdout)["token"] not in denied.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_unix_socket_transport_is_private_and_needs_the_token(home: Path) -> None:
    sock = home / "mcp.sock"
    with http_server(home, "--uds", str(sock)) as where:
        assert where == f"unix:{sock}"
        assert stat.S_ISSOCK(sock.lstat().st_mode) and stat.S_IMODE(sock.lstat().st_mode) == 0o600
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, timeout=WAIT) as raw:
            denied = raw.post("http://localhost/mcp", json=rpc(*METHODS[0]), headers=ACCEPT)
            assert denied.status_code == 401

        async def tools() -> list[str]:
            async with connect("http://localhost/mcp", uds=str(sock)) as c:
                return [t.name for t in (await c.list_tools()).tools]

        assert "memory" in anyio.run(tools)
    assert not sock.exists(), "the socket file was left behind"


def _open_session(client: httpx.Client, url: str, n: int) -> httpx.Response:
    """A stateful client's handshake and one tool call, then nothing more (an abandoned session)."""
    headers = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
    init = client.post(url, headers=headers, json=rpc("initialize", {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": f"abandoned-{n}", "version": "1"}}))
    if init.status_code != 200:
        return init
    headers["mcp-session-id"] = init.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-06-18"
    note = client.post(url, headers=headers,
                       json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202, note.text
    called = client.post(url, headers=headers, json=rpc("tools/call", {
        "name": "recall", "arguments": {"query": f"abandoned session {n}"}}, rid=2))
    assert called.status_code == 200, called.text
    return init


def test_idle_sessions_expire_their_archive_sessions_end_and_the_cap_holds(home: Path) -> None:
    # 30 s idle: opening seven sessions must end well within it, or the first ones expire
    # before the seventh is tried (a loaded machine took 12 s with 3 s idle, and the seventh
    # got its session)
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        "mcp:\n  session_idle_minutes: 0.5\n  max_sessions: 6\n", encoding="utf-8")
    with http_server(home) as url, httpx.Client(timeout=WAIT) as client:
        opened = [_open_session(client, url, n) for n in range(6)]
        assert [r.status_code for r in opened] == [200] * 6
        # the cap: a seventh session is refused while six are open
        crowded = _open_session(client, url, 6)
        assert crowded.status_code == 503, crowded.text
        # every abandoned session is closed after its idle time, its archived session ended
        def expired() -> list[dict[str, Any]] | None:
            listed = sessions(home)
            done = [s for s in listed if s["end_reason"] == "expired"]
            return listed if len(listed) == 6 and len(done) == 6 else None

        assert len(wait_for("the six abandoned sessions expired", expired)) == 6
        # and the room is back: a new client gets a session
        again = wait_for("a new session after the expiry",
                         lambda: _open_session(client, url, 7).status_code == 200)
        assert again


def test_slow_connections_under_a_low_fd_limit_do_not_lock_clients_out(home: Path) -> None:
    import socket

    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        "mcp:\n  header_timeout_seconds: 2\n", encoding="utf-8")
    with http_server(home, fd_limit=256) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        slow: list[socket.socket] = []
        try:
            for _ in range(300):
                s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
                s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                slow.append(s)

            async def tools() -> list[str]:
                async with connect(url) as c:
                    return [t.name for t in (await c.list_tools()).tools]

            # a legitimate client gets in while the slow sockets are still being held open
            assert "memory" in anyio.run(tools)
            # and every slow socket is closed by the server (never answered)
            def closed() -> bool:
                still = 0
                for s in slow:
                    s.setblocking(False)
                    try:
                        data = s.recv(4096)
                    except BlockingIOError:
                        still += 1
                        continue
                    except OSError:
                        continue
                    assert data == b"", data[:80]
                return still == 0

            wait_for("every slow connection closed", closed)
            assert "memory" in anyio.run(tools)
        finally:
            for s in slow:
                s.close()


def test_a_token_holder_cannot_send_an_unbounded_body(home: Path) -> None:
    """The SDK's cap (4 MiB, docs/mcp.md): a larger declared body is refused before it is read,
    a chunked one as soon as it passes the cap."""
    import socket
    from urllib.parse import urlsplit

    def post(url: str, framing: str) -> socket.socket:
        parts = urlsplit(url)
        sock = socket.create_connection((parts.hostname, parts.port), timeout=WAIT)
        sock.sendall((f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                      f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                      f"Accept: application/json, text/event-stream\r\n{framing}\r\n").encode())
        return sock

    def answer(sock: socket.socket) -> bytes:
        """The status line (the body never ends, so the answer cannot wait for it)."""
        got = b""
        while b"\r\n" not in got and (chunk := sock.recv(65536)):
            got += chunk
        return got

    with http_server(home) as url:
        with post(url, "Content-Length: 100000000\r\n") as sock:  # no byte of it is sent
            declared = answer(sock)
        with post(url, "Transfer-Encoding: chunked\r\n") as sock:
            chunk, sent = b"x" * 65536, 0
            try:  # 64 MiB unless the server answers and closes first
                while sent < 64 << 20:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            chunked = answer(sock)
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]


def test_stdio_still_needs_no_token(home: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp_support.serving import cli_env

    params = StdioServerParameters(command=sys.executable, args=["-m", "hermes_core", "mcp", "serve"],
                                   env=cli_env(home))

    async def tools() -> list[str]:
        async with Client(params) as c:
            return [t.name for t in (await c.list_tools()).tools]

    assert "memory" in anyio.run(tools)
    assert not (home / "mcp-token").exists()


def test_doctor_names_servers_without_the_provider_and_a_loose_token_file(home: Path) -> None:
    """Issue 34 item 9: mcp.servers set but 'mcp' not in memory.providers passed every check."""
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        "mcp:\n  servers:\n    files:\n      command: x\n", encoding="utf-8")
    token = home / "mcp-token"
    token.write_text("a-good-long-token-0123456789abcdef\n", encoding="utf-8")
    os.chmod(token, 0o644)

    def checks() -> dict[str, dict[str, Any]]:
        done = cli(home, "doctor", "--json")
        rows = json.loads(done.stdout)
        rows = rows["checks"] if isinstance(rows, dict) else rows
        return {row["name"]: row for row in rows if "mcp" in row["name"]}

    found = checks()
    unused = next(v for k, v in found.items() if k.endswith("mcp servers in use"))
    assert unused["warning"] and "'mcp' is not in memory.providers" in unused["detail"]
    loose = next(v for k, v in found.items() if k.endswith("mcp token"))
    assert not loose["ok"] and f"chmod 600 {token}" in loose["detail"]
    assert stat.S_IMODE(token.stat().st_mode) == 0o644, "doctor changed the file"
    os.chmod(token, 0o600)
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive, mcp]\n"
        "mcp:\n  servers:\n    files:\n      command: x\n", encoding="utf-8")
    found = checks()
    assert all(v["ok"] and not v["warning"] for k, v in found.items() if "mcp " in k), found


def test_config_validate_warns_of_servers_without_the_provider(home: Path) -> None:
    """Issue 34 item 9: with mcp.servers set (pasted from .mcp.json, type key and all) but 'mcp'
    not in memory.providers, `config validate` said the file was valid and nothing more."""
    config = home / "config.yaml"
    config.write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        "mcp:\n  servers:\n    files:\n      type: stdio\n      command: x\n", encoding="utf-8")
    before = config.read_bytes()
    done = cli(home, "config", "validate", "--json")
    assert done.returncode == 0, done.stderr  # valid: a warning, not an error
    report = json.loads(done.stdout)
    assert report["valid"] and not report["errors"]
    assert report["warnings"] == [
        f"{config}, line 4: mcp.servers is set, but 'mcp' is not in memory.providers, so it has "
        "no effect: add mcp to memory.providers (or remove mcp.servers)"], report
    text = cli(home, "config", "validate")
    assert "mcp.servers is set, but 'mcp' is not in memory.providers" in text.stderr
    assert config.read_bytes() == before
    config.write_text(before.decode().replace("session_archive]", "session_archive, mcp]"),
                      encoding="utf-8")
    assert json.loads(cli(home, "config", "validate", "--json").stdout)["warnings"] == []
