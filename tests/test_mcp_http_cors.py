"""A web page on an origin listed in ``mcp.allowed_origins`` can call ``mcp serve --transport
http``; a page on any other origin cannot.

A browser sends a CORS preflight (``OPTIONS``, no token) before a cross-origin request carrying
``Authorization``; the server must answer it for a listed origin, and every response to that
origin must carry ``Access-Control-Allow-Origin`` (and expose ``mcp-session-id``). The real
command in a subprocess on 127.0.0.1: raw HTTP (httpx) for the headers, then Debian's chromium
(Selenium) loading pages from two other 127.0.0.1 ports, one listed and one not. Without chromium
the browser test skips, unless HERMES_CORE_TEST_BROWSER_REQUIRED=1.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx
from mcp_support.serving import TOKEN, WAIT, http_server

ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "web page", "version": "1"}}}
PAGE = """<!doctype html><title>mcp page</title><pre id="out">waiting</pre><script>
const url = %(url)s, token = %(token)s, init = %(init)s;
const out = document.getElementById("out");
async function run() {
  const headers = {"authorization": "Bearer " + token, "content-type": "application/json",
                   "accept": "%(accept)s", "mcp-protocol-version": "2025-06-18"};
  const first = await fetch(url, {method: "POST", headers, body: JSON.stringify(init)});
  const session = first.headers.get("mcp-session-id");
  const body = await first.text();
  const listed = await fetch(url, {method: "POST", headers: {...headers, "mcp-session-id": session},
    body: JSON.stringify({jsonrpc: "2.0", id: 2, method: "tools/list", params: {}})});
  const tools = await listed.text();
  const ended = await fetch(url, {method: "DELETE", headers: {...headers, "mcp-session-id": session}});
  return {status: first.status, session, body, tools_status: listed.status, tools,
          deleted: ended.status};
}
run().then(r => { out.textContent = "done " + JSON.stringify(r); },
           e => { out.textContent = "failed " + e; });
</script>"""


class Pages:
    """A page server on 127.0.0.1 (its own port: its own origin) serving ``html``."""

    def __init__(self) -> None:
        self.html = ""
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                data = pages.html.encode("utf-8")
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


@pytest.fixture
def pages() -> Iterator[tuple[Pages, Pages]]:
    listed, unlisted = Pages(), Pages()
    try:
        yield listed, unlisted
    finally:
        listed.close()
        unlisted.close()


def make_home(tmp_path: Path, origin: str) -> Path:
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        f"mcp:\n  allowed_origins: [{json.dumps(origin)}]\n", encoding="utf-8")
    return home


def preflight(url: str, origin: str, method: str, headers: str) -> httpx.Response:
    """The ``OPTIONS`` a browser sends first (no token, no cookies)."""
    return httpx.options(url, headers={"origin": origin, "access-control-request-method": method,
                                       "access-control-request-headers": headers}, timeout=WAIT)


def words(value: str | None) -> set[str]:
    return {w.strip().lower() for w in (value or "").split(",") if w.strip()}


def test_a_listed_origin_passes_the_preflight_and_reads_the_answer(tmp_path: Path) -> None:
    origin, other = "http://127.0.0.1:5173", "http://127.0.0.1:5174"
    home = make_home(tmp_path, origin)
    with http_server(home) as url:
        asked = "authorization, content-type, mcp-protocol-version"
        first = preflight(url, origin, "POST", asked)
        assert first.status_code == 200, (first.status_code, first.text)
        assert first.headers.get("access-control-allow-origin") == origin
        assert "POST" in first.headers.get("access-control-allow-methods", "")
        assert words(asked) <= words(first.headers.get("access-control-allow-headers"))
        assert "access-control-allow-credentials" not in first.headers
        assert "vault" not in first.text and "result" not in first.text
        # the page's later calls: its session id on POST, GET (the stream) and DELETE
        for method in ("GET", "DELETE"):
            later = preflight(url, origin, method, "authorization, mcp-session-id, "
                                                   "mcp-protocol-version, last-event-id")
            assert later.status_code == 200, (method, later.text)
            assert later.headers.get("access-control-allow-origin") == origin

        authed = {"authorization": f"Bearer {TOKEN}", "accept": ACCEPT}
        answer = httpx.post(url, json=INIT, headers={**authed, "origin": origin}, timeout=WAIT)
        assert answer.status_code == 200, answer.text
        assert answer.headers.get("access-control-allow-origin") == origin
        assert "mcp-session-id" in words(answer.headers.get("access-control-expose-headers"))
        assert answer.headers.get("mcp-session-id")
        assert "origin" in words(answer.headers.get("vary"))

        # the preflight opens nothing: the listed origin's request still needs the token
        tokenless = httpx.post(url, json=INIT, headers={"accept": ACCEPT, "origin": origin},
                               timeout=WAIT)
        assert tokenless.status_code == 401 and "bearer token" in tokenless.json()["error"]
        assert tokenless.headers.get("access-control-allow-origin") == origin  # page reads why
        # an unlisted origin: no preflight passes, its requests get 403 with the token, and
        # nothing says a browser may read them
        refused = preflight(url, other, "POST", asked)
        assert refused.status_code in (401, 403)
        assert "access-control-allow-origin" not in refused.headers
        page = httpx.post(url, json=INIT, headers={**authed, "origin": other}, timeout=WAIT)
        assert page.status_code == 403 and "mcp.allowed_origins" in page.text
        assert "access-control-allow-origin" not in page.headers
        # no Origin (a desktop client): unchanged, and no CORS headers
        plain = httpx.post(url, json=INIT, headers=authed, timeout=WAIT)
        assert plain.status_code == 200
        assert not [h for h in plain.headers if h.startswith("access-control-")]
        assert not [h for h in first.headers.values() if h.strip() == "*"]


@pytest.fixture
def browser() -> Iterator[Any]:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    required = os.environ.get("HERMES_CORE_TEST_BROWSER_REQUIRED") == "1"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if required:
            pytest.fail("selenium is not installed (it is in the test extra)")
        pytest.skip("selenium is not installed")
    if not chrome or not driver_path:
        if required:
            pytest.fail("chromium and chromedriver are required (HERMES_CORE_TEST_BROWSER_REQUIRED"
                        "=1): apt-get install -y chromium chromium-driver")
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def page_result(driver: Any, url: str) -> str:
    """Load ``url`` and wait until its script has written its outcome."""
    driver.get(url)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        text = str(driver.find_element("id", "out").text)
        if text != "waiting":
            return text
        time.sleep(0.05)
    raise AssertionError(f"the page at {url} wrote no outcome within {WAIT:g} s")


def test_a_page_on_a_listed_origin_calls_the_server_in_a_browser(
        tmp_path: Path, pages: tuple[Pages, Pages], browser: Any) -> None:
    listed, unlisted = pages
    home = make_home(tmp_path, listed.origin)
    with http_server(home) as url:
        for p in pages:
            p.html = PAGE % {"url": json.dumps(url), "token": json.dumps(TOKEN),
                             "init": json.dumps(INIT), "accept": ACCEPT}
        done = page_result(browser, listed.origin + "/")
        assert done.startswith("done "), done
        result = json.loads(done[len("done "):])
        assert result["status"] == 200 and result["session"], result
        assert '"result"' in result["body"] and "hermes-core" in result["body"]
        assert result["tools_status"] == 200 and '"recall"' in result["tools"], result
        assert result["deleted"] in (200, 204), result

        failed = page_result(browser, unlisted.origin + "/")
        assert failed.startswith("failed ") and "fetch" in failed.lower(), failed
