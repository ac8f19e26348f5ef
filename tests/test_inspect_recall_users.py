"""The inspector's recall never shows one user's recall to another.

A provider late for a recall contributes its last answer (``stale``), as in a conversation. The
inspector serves every caller; a user-scoped token (``inspect token --user bob``) must never get
the last answer made for alice. Real HTTP app (FastAPI's test client), a real host, a throwaway
provider recalling per user; its late call waits on an event.
"""

from __future__ import annotations

import threading

from agent_support import make_host
from fastapi.testclient import TestClient

from hermes_core import MemoryProvider, hookimpl
from hermes_core.bearer import resolve
from hermes_core.plugins.inspect.api import build_app
from hermes_core.plugins.inspect.auth import Gate, issue_user_token
from hermes_core.plugins.inspect.service import Inspector


def test_a_late_provider_never_shows_another_users_recall(home, monkeypatch):
    release = threading.Event()

    class Lockers(MemoryProvider):
        name = "lockers"
        codes = {"alice": "alice's locker code is 4711", "bob": "bob's locker code is 0815"}

        @hookimpl
        def prefetch(self, query, session):
            if session.user_id == "bob":
                release.wait(10)  # late for bob's recall
            return Lockers.codes.get(session.user_id or "")

    monkeypatch.delenv("HERMES_CORE_MCP_TOKEN", raising=False)
    host = make_host(home, providers=[Lockers])
    # room for alice's answer on a loaded machine (the deadline the inspector reads)
    monkeypatch.setattr(host.config.core.memory, "prefetch_timeout", 2.0)
    # a user-scoped token may recall only when memory is per user (else 403: test_inspect_api)
    monkeypatch.setattr(host.config.core.memory, "scope", "user")
    credential, token = resolve(home, "HERMES_CORE_MCP_TOKEN")
    bob = issue_user_token(home, "bob")
    inspector = Inspector(host)
    try:
        client = TestClient(build_app(inspector, Gate(credential, home)))
        admin = {"Authorization": f"Bearer {token}"}
        seen = client.post("/api/recall?user=alice", json={"query": "my locker?"}, headers=admin)
        assert seen.status_code == 200 and "4711" in seen.json()["block"]
        late = client.post("/api/recall", json={"query": "my locker?"},
                           headers={"Authorization": f"Bearer {bob}"})
        assert late.status_code == 200, late.text
        assert [p["status"] for p in late.json()["providers"]] == ["stale"]
        assert "4711" not in late.text and "alice" not in late.text
    finally:
        release.set()
        inspector.close()
        host.shutdown()
