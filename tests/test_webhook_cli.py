"""``hermes-core serve`` as a real process: starts, answers signed requests, stops on SIGTERM.

The docs' Python client example (docs/platforms.md) is run against it, so the copy-paste client
in the docs is known to work.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner
from platform_support import EchoModel, archived, platform_config

from hermes_core.cli import cli
from hermes_core.plugins.platforms.webhook import SECRET_ENV, signed_headers
from hermes_core.testing import MessagesAPIServer

SECRET = "cli-test-secret-0123456789abcdef"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "platforms.md"


def start_serve(home: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "HERMES_CORE_HOME": str(home), SECRET_ENV: SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_core", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    found = re.search(r"listening on (http://\S+)", line)
    if not found:
        proc.kill()
        raise AssertionError(f"no 'listening on' line: {line!r} {proc.stderr.read()}")
    return proc, found.group(1)


def docs_client_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    clients = [b for b in blocks if "def send(" in b]
    assert clients, "docs/platforms.md has no Python client example"
    return clients[0]


def test_serve_answers_signed_requests_and_stops_on_sigterm(home):
    with MessagesAPIServer(EchoModel()) as api:
        (home / "config.yaml").write_text(platform_config(api), encoding="utf-8")
        proc, url = start_serve(home)
        try:
            body = json.dumps({"conversation_key": "cli-test", "text": "hello"}).encode()
            response = httpx.post(f"{url}/messages", content=body, timeout=30,
                                  headers={"Content-Type": "application/json",
                                           **signed_headers(SECRET, body)})
            assert response.status_code == 200 and response.json()["reply"] == "re: hello (1)"
            # the documented client, copied from the docs, run as written
            namespace = {"__name__": "docs_client"}
            os.environ["HERMES_CORE_WEBHOOK_URL"] = url
            os.environ[SECRET_ENV] = SECRET
            try:
                exec(compile(docs_client_example(), "docs/platforms.md", "exec"), namespace)
                reply = namespace["send"]("cli-test", "and again")
            finally:
                os.environ.pop("HERMES_CORE_WEBHOOK_URL", None)
                os.environ.pop(SECRET_ENV, None)
            assert reply == "re: and again (2)"
            unsigned = httpx.post(f"{url}/messages?token=abc", content=body, timeout=30,
                                  headers={"Content-Type": "application/json"})
            assert unsigned.status_code == 401
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopping" in err
    # one access line per request in the home's log file, at serve's default level, the refused
    # one with its reason; no query string, header or secret in any of them
    log = (home / "logs" / "hermes-core.log").read_text(encoding="utf-8")
    lines = [line for line in log.splitlines() if "webhook.access" in line]
    assert len([line for line in lines if '"POST /messages" 200 ' in line]) == 2, log
    (refused,) = [line for line in lines if '"POST /messages" 401 ' in line]
    assert "missing headers" in refused and "127.0.0.1:" in refused
    assert "token=abc" not in log and SECRET not in log and "webhook-signature: v1" not in log
    assert [c for _s, _r, k, c in archived(home) if k == "cli-test"] == [
        "hello", "re: hello (1)", "and again", "re: and again (2)"]


def test_serve_refuses_a_port_in_use_and_a_missing_key(home, monkeypatch):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    monkeypatch.setenv(SECRET_ENV, SECRET)
    try:
        with MessagesAPIServer(EchoModel()) as api:
            (home / "config.yaml").write_text(platform_config(api), encoding="utf-8")
            busy = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    finally:
        taken.close()
    assert busy.exit_code == 1 and f"port {port} on 127.0.0.1 is already in use" in busy.output
    (home / "config.yaml").write_text(platform_config(None), encoding="utf-8")
    no_key = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert no_key.exit_code == 3 and "no API key is configured" in no_key.output


def test_serve_rejects_host_and_port_for_a_platform_that_does_not_listen(home, monkeypatch):
    with MessagesAPIServer(EchoModel()) as api:
        (home / "config.yaml").write_text(platform_config(api), encoding="utf-8")
        result = CliRunner().invoke(cli, ["serve", "--platform", "cli", "--port", "9"])
    assert result.exit_code == 2 and "do not apply to the 'cli' platform" in result.output


def test_the_documented_curl_example_is_accepted(home):
    import shutil

    import pytest

    if not (shutil.which("curl") and shutil.which("openssl") and shutil.which("bash")):
        pytest.skip("curl, openssl or bash is not installed")
    script = re.findall(r"```bash\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)[0]
    with MessagesAPIServer(EchoModel()) as api:
        (home / "config.yaml").write_text(platform_config(api), encoding="utf-8")
        proc, url = start_serve(home)
        try:
            done = subprocess.run(["bash", "-c", script.replace("http://127.0.0.1:8787", url)],
                                  capture_output=True, text=True, timeout=60,
                                  env={**os.environ, SECRET_ENV: SECRET})
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    assert json.loads(done.stdout)["reply"] == "re: What did we decide about the deploy? (1)", (
        done.stdout + done.stderr)
