"""``hermes-core inspect``'s REST API: every endpoint with and without the credential, per-user
isolation, bad input, page/CLI conflicts; SQLite and PostgreSQL (``storage_url``); one test
through a real uvicorn server on 127.0.0.1 (the others through FastAPI's TestClient, which runs
the same ASGI app in-process)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient
from inspect_support import copy_home, memory_text, open_stack, plant, run

from hermes_core.testing.harness import isolated_home

#: every route of the API with a request that is valid once authorised
ENDPOINTS: list[tuple[str, str, dict | None]] = [
    ("GET", "/api/whoami", None),
    ("GET", "/api/memory", None),
    ("POST", "/api/memory/{target}/add", {"content": "Likes tea"}),
    ("POST", "/api/memory/{target}/replace", {"old_text": "tea", "content": "Likes coffee"}),
    ("POST", "/api/memory/{target}/remove", {"old_text": "coffee"}),
    ("GET", "/api/memory/history", None),
    ("GET", "/api/memory/diff?version=1", None),
    ("POST", "/api/memory/rollback", {"version": 1}),
    ("POST", "/api/memory/pin", {"target": "memory", "text": "bees"}),
    ("POST", "/api/memory/unpin", {"target": "memory", "text": "bees"}),
    ("GET", "/api/sessions", None),
    ("GET", "/api/sessions/{session_id}", None),
    ("GET", "/api/facts", None),
    ("GET", "/api/search?q=beehive", None),
    ("POST", "/api/recall", {"query": "how many hives"}),
    ("GET", "/api/providers", None),
    ("GET", "/api/doctor", None),
    ("GET", "/api/eval", None),
    ("GET", "/api/eval/{name}", None),
    ("POST", "/api/forget", {"subject": "Rotterdam", "dry_run": True}),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A planted SQLite home, made once; tests on SQLite get a copy (planting takes seconds)."""
    path = tmp_path_factory.mktemp("inspect") / "home"
    storage = os.environ.pop("HERMES_CORE_STORAGE_URL", None)
    try:
        with isolated_home(path=path):
            plant(path)
    finally:
        if storage is not None:
            os.environ["HERMES_CORE_STORAGE_URL"] = storage
    return path


@pytest.fixture
def sqlite_home(home: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    monkeypatch.delenv("HERMES_CORE_MCP_TOKEN", raising=False)
    shutil.rmtree(home)
    copy_home(template, home)
    return home


@pytest.fixture
def sqlite_client(sqlite_home: Path):
    with open_stack(sqlite_home) as opened:
        yield TestClient(opened.app), opened


@pytest.fixture
def backend(home: Path, storage_url: str | None, monkeypatch: pytest.MonkeyPatch,
            template: Path) -> str | None:
    if storage_url is None:  # the planted copy
        shutil.rmtree(home)
        copy_home(template, home)
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    else:
        monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    monkeypatch.delenv("HERMES_CORE_MCP_TOKEN", raising=False)
    if storage_url:
        plant(home)
    return storage_url


@pytest.fixture
def stack(home: Path, backend: str | None):
    with open_stack(home) as opened:
        yield opened


@pytest.fixture
def client(stack) -> TestClient:
    return TestClient(stack.app)


def _url(path: str) -> str:
    return (path.replace("{target}", "memory").replace("{session_id}", "s-alice")
            .replace("{name}", "hybrid.json"))


def test_every_route_is_listed_here_and_in_the_openapi_document(sqlite_client):
    client, _stack = sqlite_client
    doc = client.get("/api/openapi.json").json()
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert documented == {(m, p.split("?")[0]) for m, p, _b in ENDPOINTS}


def test_without_or_with_a_wrong_credential_every_endpoint_is_401(sqlite_client):
    client, _stack = sqlite_client
    wrong = ({}, {"Authorization": "Bearer not-the-token-at-all-123"},
             {"Authorization": "Basic Zm9vOmJhcg=="})
    for (method, path, body), headers in itertools.product(ENDPOINTS, wrong):
        answer = client.request(method, _url(path), json=body, headers=headers)
        assert answer.status_code == 401, (path, answer.text)
        assert "credential is required" in answer.json()["detail"]


def test_with_the_home_token_every_endpoint_answers(sqlite_client):
    client, stack = sqlite_client
    for method, path, body in ENDPOINTS:
        url = _url(path)
        if ("memory" in url and "?" not in url and method == "POST") or url.startswith(
                ("/api/memory", "/api/sessions", "/api/search", "/api/recall", "/api/forget",
                 "/api/facts")):
            url += ("&" if "?" in url else "?") + "user=alice"
        answer = client.request(method, url, json=body, headers=stack.auth())
        assert answer.status_code == 200, (method, url, answer.text)


def test_memory_read_history_diff_and_rollback_change_what_is_stored(client, stack, home, backend):
    state = client.get("/api/memory", headers=stack.auth()).json()
    texts = [e["text"] for e in state["stores"]["user"]["entries"]]
    assert any("Rotterdam" in t for t in texts)  # planted by the replay
    assert state["stores"]["memory"]["limit"] == 2200 and state["stores"]["memory"]["size"] > 0
    versions = client.get("/api/memory/history", headers=stack.auth()).json()
    assert [v["origin"] for v in versions][:1] == ["assistant_tool"]
    first, last = versions[0]["version"], versions[-1]["version"]
    diff = client.get(f"/api/memory/diff?version={first}&other={last}", headers=stack.auth()).json()
    assert diff and any(line.startswith("+") for d in diff for line in d["diff"])
    before = memory_text(home, backend)
    answer = client.post("/api/memory/rollback", json={"version": first,
                                                       "expected_version": last},
                         headers=stack.auth())
    assert answer.status_code == 200, answer.text
    assert answer.json()["restored"] == first
    assert memory_text(home, backend) != before
    newest = client.get("/api/memory/history", headers=stack.auth()).json()[-1]
    assert newest["action"] == "rollback" and newest["origin"] == "inspect"


def test_bad_input_gets_a_clear_error_and_changes_nothing(client, stack, home, backend):
    before = memory_text(home, backend)
    answer = client.post("/api/memory/rollback", json={"version": 999}, headers=stack.auth())
    assert answer.status_code == 404 and "no version 999" in answer.json()["detail"]
    for subject, words in (("", "empty"), ("a", "too short")):
        answer = client.post("/api/forget", json={"subject": subject}, headers=stack.auth())
        assert answer.status_code == 400 and words in answer.json()["detail"]
    answer = client.get("/api/search", params={"q": "x" * 10_000}, headers=stack.auth())
    assert answer.status_code == 400 and "10,000 characters" in answer.json()["detail"]
    answer = client.post("/api/recall", json={"query": "y" * 10_000}, headers=stack.auth())
    assert answer.status_code == 400
    answer = client.post("/api/forget", json={"subject": "Rotterdam", "dry_run": False},
                         headers=stack.auth())
    assert answer.status_code == 400 and "preview it first" in answer.json()["detail"]
    answer = client.post("/api/memory/memory/remove", json={"old_text": "no such entry"},
                         headers=stack.auth())
    assert answer.status_code == 404
    answer = client.get("/api/memory?user=../etc", headers=stack.auth())
    assert answer.status_code == 400
    assert memory_text(home, backend) == before


def test_a_stale_version_is_a_conflict_naming_it_and_the_cli_edit_is_kept(client, stack, home,
                                                                          backend):
    seen = client.get("/api/memory", headers=stack.auth()).json()["version"]
    run("memory", "add", "--target", "memory", "Edited from the CLI meanwhile")
    answer = client.post("/api/memory/memory/add", json={"content": "From the page",
                                                         "expected_version": seen},
                         headers=stack.auth())
    assert answer.status_code == 409
    assert f"changed since version {seen}" in answer.json()["detail"]
    answer = client.post("/api/memory/rollback", json={"version": 1, "expected_version": seen},
                         headers=stack.auth())
    assert answer.status_code == 409
    texts = [e["text"] for e in client.get("/api/memory", headers=stack.auth()).json()
             ["stores"]["memory"]["entries"]]
    assert "Edited from the CLI meanwhile" in texts and "From the page" not in texts


def test_a_user_token_sees_only_its_user(client, stack):
    alice = stack.auth("alice")
    mine = client.get("/api/memory", headers=alice).json()
    assert mine["user"] == "alice"
    assert [e["text"] for e in mine["stores"]["memory"]["entries"]] == [
        "Alice keeps bees on a rooftop in Porto"]
    assert client.get("/api/memory?user=bob", headers=alice).status_code == 403
    sessions = client.get("/api/sessions", headers=alice).json()
    assert [s["id"] for s in sessions] == ["s-alice-research", "s-alice"]  # with its subagent's
    assert client.get("/api/sessions/s-alice", headers=alice).status_code == 200
    other = client.get("/api/sessions/s-bob", headers=alice)
    assert other.status_code == 404 and "no session 's-bob'" in other.json()["detail"]
    found = client.get("/api/search", params={"q": "beehive"}, headers=alice).json()
    ids = {r["session_id"] for r in found["results"]}
    assert ids == {"s-alice"}
    assert client.get("/api/doctor", headers=alice).status_code == 403
    assert client.get("/api/eval", headers=alice).status_code == 403
    assert client.get("/api/eval/hybrid.json", headers=alice).status_code == 403
    written = client.post("/api/memory/memory/add", json={"content": "Alice drinks mate"},
                          headers=alice)
    assert written.status_code == 200
    bob = client.get("/api/memory", headers=stack.auth("bob")).json()
    assert "Alice drinks mate" not in json.dumps(bob)
    # the home's token may look at any user
    assert client.get("/api/memory?user=bob", headers=stack.auth()).json()["user"] == "bob"


def test_session_show_pin_recall_and_forget_preview_then_confirm(client, stack, home, backend):
    listed = client.get("/api/sessions?user=alice", headers=stack.auth()).json()
    assert [s["id"] for s in listed] == ["s-alice-research", "s-alice"]
    shown = client.get("/api/sessions/s-alice?user=alice", headers=stack.auth()).json()
    assert shown["message_count"] == 2 and shown["lineage"] == ["s-alice", "s-alice-research"]
    assert shown["children"] == ["s-alice-research"]
    assert shown["messages"][0]["content"] == "alice: my beehive count is 12"
    pinned = client.post("/api/memory/pin?user=alice", json={"target": "memory", "text": "bees"},
                         headers=stack.auth())
    assert pinned.status_code == 200
    state = client.get("/api/memory?user=alice", headers=stack.auth()).json()
    assert state["stores"]["memory"]["entries"][0]["pinned"] is True
    recalled = client.post("/api/recall", json={"query": "beehive"}, headers=stack.auth()).json()
    assert {p["provider"] for p in recalled["providers"]} >= {"file_memory", "session_archive"}
    assert all(p["status"] in ("fresh", "stale", "error") for p in recalled["providers"])
    preview = client.post("/api/forget", json={"subject": "Rotterdam"}, headers=stack.auth()).json()
    assert preview["dry_run"] and any(r["matched"] for r in preview["plan"])
    assert "Rotterdam" in memory_text(home, backend)  # a preview deletes nothing
    done = client.post("/api/forget", json={"subject": "Rotterdam", "confirm": True},
                       headers=stack.auth())
    assert done.status_code == 200 and any(r["deleted"] for r in done.json()["result"])
    assert "Rotterdam" not in memory_text(home, backend)


def test_one_time_link_sets_a_cookie_once_and_foreign_origins_are_refused(sqlite_client):
    client, stack = sqlite_client
    code = stack.gate.link_code()
    login = client.get(f"/login?code={code}", follow_redirects=False)
    assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
    assert client.get("/api/memory").status_code == 200  # the cookie jar carries it
    again = TestClient(stack.app).get(f"/login?code={code}", follow_redirects=False)
    assert again.status_code == 401  # spent
    foreign = client.get("/api/memory", headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    scoped = TestClient(stack.app)
    scoped.get(f"/login?code={stack.gate.link_code('bob')}")
    assert scoped.get("/api/whoami").json()["user"] == "bob"


def test_page_is_self_contained_and_small(sqlite_client):
    client, _stack = sqlite_client
    page = client.get("/")
    assert page.status_code == 200 and "default-src 'none'" in page.headers[
        "content-security-policy"]
    assert len(page.content) <= 300 * 1024
    # namespace names (never fetched) aside, no address outside the server appears
    names = page.text.replace('xmlns="http://', "").replace('"http://www.w3.org/2000/svg"', "")
    assert "innerHTML" not in page.text and "http://" not in names


def test_real_server_on_loopback_concurrent_edits_lose_nothing(sqlite_client):
    _client, stack = sqlite_client
    from hermes_core.plugins.inspect.serve import start_thread

    running = start_thread(stack.app)
    try:
        assert running.url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=running.url, timeout=30) as http:
            assert http.get("/api/memory").status_code == 401
            errors: list[str] = []

            def add(n: int) -> None:
                r = http.post("/api/memory/memory/add", json={"content": f"Parallel fact {n}"},
                              headers=stack.auth())
                if r.status_code != 200:
                    errors.append(r.text)

            threads = [threading.Thread(target=add, args=(n,)) for n in range(6)]
            for t in threads:
                t.start()
            run("memory", "add", "--target", "memory", "CLI fact during the page's writes")
            for t in threads:
                t.join()
            assert not errors
            texts = [e["text"] for e in http.get("/api/memory", headers=stack.auth()).json()
                     ["stores"]["memory"]["entries"]]
            assert {f"Parallel fact {n}" for n in range(6)} | {
                "CLI fact during the page's writes"} <= set(texts)
    finally:
        running.stop()


def test_recall_shows_a_hung_provider_as_late_within_the_deadline(home, monkeypatch):
    """A provider that hangs: recall answers after the prefetch deadline, saying it was late;
    the fast one's answer is fenced as the model sees it."""
    import time

    from agent_support import make_host

    from hermes_core import MemoryProvider, hookimpl
    from hermes_core.bearer import resolve
    from hermes_core.plugins.inspect.api import build_app
    from hermes_core.plugins.inspect.auth import Gate
    from hermes_core.plugins.inspect.service import Inspector

    release = threading.Event()

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def prefetch(self, query):
            release.wait(10)
            return "too late"

    class Fast(MemoryProvider):
        name = "fast"

        @hookimpl
        def prefetch(self, query):
            return f"fast knows {query}"

    monkeypatch.delenv("HERMES_CORE_MCP_TOKEN", raising=False)
    host = make_host(home, providers=[Hung, Fast])
    credential, token = resolve(home, "HERMES_CORE_MCP_TOKEN")
    inspector = Inspector(host)
    try:
        client = TestClient(build_app(inspector, Gate(credential, home)))
        auth = {"Authorization": f"Bearer {token}"}
        started = time.perf_counter()
        answer = client.post("/api/recall", json={"query": "tea"}, headers=auth).json()
        assert time.perf_counter() - started < 5  # the 10 s hang was cut at the deadline
        assert [(p["provider"], p["status"]) for p in answer["providers"]] == [
            ("hung", "stale"), ("fast", "fresh")]
        assert "<memory-context>" in answer["block"] and "fast knows tea" in answer["block"]
        state = client.get("/api/providers", headers=auth).json()
        assert state["recall_timings"]["hung"]["late"] == 1
        assert state["recall_timings"]["fast"]["calls"] == 1
        assert state["problem_count"] >= 1 and "hung" in json.dumps(state["problems_by_plugin"])
    finally:
        release.set()
        inspector.close()
        host.shutdown()


def test_eval_reports_listed_and_charted_and_bad_names_refused(sqlite_client):
    client, stack = sqlite_client
    runs = client.get("/api/eval", headers=stack.auth()).json()
    by_name = {r["name"]: r for r in runs}
    assert set(by_name) == {"words-only.json", "hybrid.json", "notes.json"}
    assert "not a hermes-core eval report" in by_name["notes.json"]["error"]
    assert by_name["hybrid.json"]["recall"] == {"@1": 0.75, "@3": 0.75}
    assert by_name["words-only.json"]["questions"] == 2
    one = client.get("/api/eval/words-only.json", headers=stack.auth()).json()
    assert one["types"] == ["single-session", "temporal", "overall"]
    assert one["recall"]["temporal"] == {"@1": 0.0, "@3": 0.0}
    assert one["tokens_mean"]["single-session"] == 120.0
    assert [q["tokens"] for q in one["questions"]] == [120, 80]
    missing = client.get("/api/eval/nothing.json", headers=stack.auth())
    assert missing.status_code == 404 and "no eval report 'nothing.json'" in missing.json()["detail"]
    bad = client.get("/api/eval/bad name.json", headers=stack.auth())
    assert bad.status_code == 400 and "not a report name" in bad.json()["detail"]
    not_report = client.get("/api/eval/notes.json", headers=stack.auth())
    assert not_report.status_code == 400 and "--out FILE" in not_report.json()["detail"]


def _raw_answer(url: str, head: str, body: bytes = b"") -> bytes:
    """What the server sends back to a request written by hand (up to the connection's close)."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=20) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pass
        return answer


def test_a_body_is_not_read_before_the_credential_and_its_size_is_capped(sqlite_client):
    """FastAPI reads a request's body before any dependency runs: a caller without a
    credential could make the inspector wait for (and hold in memory) a body of any size before
    it answered 401. The credential is now checked first, and a body is capped in size."""
    _client, stack = sqlite_client
    from hermes_core.plugins.inspect.api import MAX_BODY_BYTES
    from hermes_core.plugins.inspect.serve import start_thread

    running = start_thread(stack.app)
    try:
        port = running.url.rsplit(":", 1)[1]
        # 50 MB declared, none sent: answered at once, the body never waited for
        head = (f"POST /api/memory/memory/add HTTP/1.1\nHost: 127.0.0.1:{port}\n"
                "Content-Type: application/json\nContent-Length: 50000000\n")
        refused = _raw_answer(running.url, head)
        assert refused.startswith(b"HTTP/1.1 401 "), refused[:200]
        assert b"credential is required" in refused
        foreign = _raw_answer(running.url, head.replace(
            "Content-Type", f"Authorization: Bearer {stack.token}\nOrigin: http://evil.example\n"
            "Content-Type"))
        assert foreign.startswith(b"HTTP/1.1 403 "), foreign[:200]
        # with the credential, a declared size over the cap is 413, also unread
        too_big = _raw_answer(running.url, head.replace(
            "Content-Type", f"Authorization: Bearer {stack.token}\nContent-Type"))
        assert too_big.startswith(b"HTTP/1.1 413 "), too_big[:200]
        assert str(MAX_BODY_BYTES).encode() in too_big
        with httpx.Client(base_url=running.url, timeout=30) as http:
            # a chunked body (no length up front) is counted as it arrives
            def chunks():
                yield b'{"content": "'
                for _ in range(MAX_BODY_BYTES // 65536 + 1):
                    yield b"x" * 65536
                yield b'"}'
            streamed = http.post("/api/memory/memory/add", content=chunks(),
                                 headers={**stack.auth(), "Content-Type": "application/json"})
            assert streamed.status_code == 413, streamed.text[:200]
            assert str(MAX_BODY_BYTES) in streamed.json()["detail"]
            # requests within the cap and the public routes are as before
            ok = http.post("/api/memory/memory/add", json={"content": "Keeps a ladder"},
                           headers=stack.auth())
            assert ok.status_code == 200, ok.text
            assert http.get("/api/openapi.json").status_code == 200
            assert http.get("/health").status_code == 200
    finally:
        running.stop()


def test_a_user_token_cannot_search_every_users_sessions_when_memory_is_shared(home: Path):
    """With memory.scope: global (the default) the session archive's search and recall are not
    per user, so a token scoped to alice found bob's messages through /api/search (while
    /api/sessions/s-bob was 404 to her). Such a token now gets 403 there, naming the fix."""
    from hermes_core.commands import load_host
    from hermes_core.types import EndReason, Message, Session, SwitchReason

    (home / "config.yaml").write_text("memory:\n  providers: [file_memory, session_archive]\n",
                                      encoding="utf-8")
    host = load_host()
    try:
        host.activate_memory_providers()
        for user in ("alice", "bob"):
            session = Session(id=f"s-{user}", platform="t", attributes={"user_id": user})
            host.hooks.on_session_switch(new_session=session, old_session=None,
                                         reason=SwitchReason.NEW)
            host.hooks.on_message(message=Message(
                "user", f"my locker code is {user}-4711, next to the marmalade"), session=session)
            host.hooks.on_session_end(session=session, messages=[], reason=EndReason.USER_EXIT)
    finally:
        host.shutdown()
    with open_stack(home) as stack:
        client = TestClient(stack.app)
        for request in (lambda h: client.get("/api/search?q=marmalade locker", headers=h),
                        lambda h: client.post("/api/recall", json={"query": "marmalade locker"},
                                              headers=h)):
            refused = request(stack.auth("alice"))
            assert refused.status_code == 403, refused.text[:300]
            assert "bob-4711" not in refused.text
            assert "memory.scope: user" in refused.json()["detail"]
            assert request(stack.auth()).status_code == 200  # the home's token sees everything
        found = client.get("/api/search?q=marmalade locker", headers=stack.auth()).text
        assert "bob-4711" in found and "alice-4711" in found
        # what is filtered per user stays open to her
        listed = client.get("/api/sessions", headers=stack.auth("alice")).json()
        assert [s["id"] for s in listed] == ["s-alice"]
