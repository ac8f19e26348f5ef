"""The whole path against the real server: the agent loop (real anthropic SDK against the loopback
Messages API — the model's words are the only fake), replay of a recorded conversation, outages.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import hermes_core_hindsight
import httpx
import pytest
from hermes_core_hindsight import HindsightClient, HindsightMemory, HindsightRejected

from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.errors import ToolError
from hermes_core.host import PluginHost
from hermes_core.replay import RecordingHost, load_transcript, replay
from hermes_core.testing import MessagesAPIServer, Reply, make_instance
from hermes_core.types import Session, ToolContext

from .conftest import API_KEY, REPO, config_text


def llm_section(base_url: str) -> str:
    """The `llm:` section pointing the kernel's main client at a loopback Messages API server."""
    return (f"llm:\n  base_url: {base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n")


def load_host(home: Path, text: str, cls: type[PluginHost] = PluginHost) -> PluginHost:
    """A host whose only third-party plugin is this one, registered explicitly (no entry points:
    the test must not depend on what is installed; tests/integration/test_hs_install_real.py
    checks discovery through the entry point)."""
    config = parse_config_text(text, home / "config.yaml")
    return cls.load(home, config=config, entry_points=False, directories=False,
                    plugins=[("hindsight", hermes_core_hindsight)])


def provider_of(host: PluginHost) -> HindsightMemory:
    instance = host.instances["memory-provider:hindsight"]
    assert isinstance(instance, HindsightMemory)
    return instance


#: how long a test waits for the server's own queue (retains, consolidations) to finish: the
#: wait ends as soon as the server says it is done; the bound only matters on a loaded machine
SETTLE = 300.0


def settle_bank(base_url: str, bank: str, key: str | None = API_KEY,
                timeout: float = SETTLE) -> None:
    """Wait (bounded) until the server reports no pending or processing operation in ``bank``."""
    client = HindsightClient(base_url, api_key=key)
    end = time.monotonic() + timeout
    try:
        while client.pending_operations(bank):
            assert time.monotonic() < end, f"bank {bank} still busy after {timeout:.0f} s"
            time.sleep(0.2)  # poll interval between two looks at the server's status
    finally:
        client.close()


def settled(provider: HindsightMemory) -> None:
    """The provider's retains are stored and searchable on the server (its operation status)."""
    assert provider.settle(SETTLE), (
        f"not settled after {SETTLE:.0f} s: spooled {len(provider.retains.spool)}, failed "
        f"operations {provider.failed_operations}")
    assert not provider.failed_operations, provider.failed_operations


def test_replayed_conversation_is_retained(server, hermes_home, bank, api_key_env):
    transcript = load_transcript(REPO / "examples" / "first-week.jsonl")
    host = load_host(hermes_home, "memory:\n  providers: [file_memory, hindsight]\n"
                     + config_text(server.base_url, bank), RecordingHost)
    assert isinstance(host, RecordingHost)
    report = replay(transcript, host)  # shuts the host down: the lanes are drained
    assert report.summary["turns"] == len(transcript.turns)
    assert report.summary["tool_errors"] == 0 and report.summary["worker_drain"]["status"] == "drained"
    assert report.summary["logged_problems"] == 0, [t["log"] for t in report.turns]
    settle_bank(server.base_url, bank)

    sessions = {t["session_id"] for t in report.turns}
    assert len(sessions) == 2
    with httpx.Client(base_url=server.base_url,
                      headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        docs = http.get(f"/v1/default/banks/{bank}/documents").json()["items"]
        assert {d["id"] for d in docs} >= sessions, "one document per session"
        first = next(t["session_id"] for t in report.turns)
        text = http.get(f"/v1/default/banks/{bank}/documents/{first}").json()["original_text"]
    # every turn of the session, appended in order
    order = [text.index(s) for s in ("I'm Priya", "keeps timing out", "pandas to_sql",
                                     "Postgres 15 on RDS")]
    assert order == sorted(order), text
    client = HindsightClient(server.base_url, api_key=API_KEY)
    found = client.recall(bank, "which database does the warehouse run on", types=["world"])
    assert any("Postgres 15" in m.text for m in found)


def test_new_session_recalls_an_earlier_fact_in_other_words(server, hermes_home, bank,
                                                            api_key_env):
    # The turn's live recall may take up to 5 s (the default 0.2 s is a latency budget, tested
    # elsewhere; on a loaded machine a recall can miss it and the turn rightly goes on without it)
    with MessagesAPIServer(["Glad it works now.", "You raised the connection pool size to 40."]) as api:
        host = load_host(hermes_home, "memory:\n  providers: [hindsight]\n  prefetch_timeout: 10\n"
                         + config_text(server.base_url, bank, "  prefetch_live_wait: 5\n")
                         + llm_section(api.base_url))
        agent = Agent.create(host)  # the client llm.* selects (the kernel builds it)
        agent.run_turn("The nightly import froze again. I fixed the database hang by raising "
                       "the connection pool size to 40.")
        first_session = agent.session.id
        agent.new_session()
        assert agent.worker.flush(60)  # the kernel's worker has run sync_turn and the switch
        settled(provider_of(host))
        result = agent.run_turn("how did I solve the timeout?")
        agent.close()
    recalled = next(r for r in result.prefetch if r.provider == "hindsight")
    assert recalled.status == "fresh", recalled
    assert "database hang" in recalled.text and result.session_id != first_session
    sent = api.requests[-1].body["messages"][-1]["content"]
    sent_text = sent if isinstance(sent, str) else " ".join(b.get("text", "") for b in sent)
    assert "<memory-context>" in sent_text and "database hang" in sent_text


class _Silent:
    """A TCP server on 127.0.0.1 that accepts connections and never answers (a hung server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture(params=["down", "hung"])
def dead_url(request) -> Iterator[str]:
    if request.param == "down":
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    else:
        silent = _Silent()
        yield f"http://127.0.0.1:{silent.port}"
        silent.close()


def test_turns_complete_within_the_deadline_when_the_server_is_down_or_hung(
        hermes_home, dead_url, bank):
    with MessagesAPIServer(default=Reply(text="ok")) as api:
        host = load_host(hermes_home, "memory:\n  providers: [hindsight]\n  prefetch_timeout: 0.3\n"
                         + config_text(dead_url, bank, "  shutdown_timeout: 1\n"
                                                       "  switch_flush_timeout: 0.5\n"
                                                       "  connect_timeout: 10\n"
                                                       "  recall_timeout: 20\n")
                         + llm_section(api.base_url))
        agent = Agent.create(host)  # the client llm.* selects (the kernel builds it)
        seconds = []
        for n in range(4):
            result = agent.run_turn(f"turn number {n} about the deploy")
            seconds.append(result.seconds)
            prefetch = next(r for r in result.prefetch if r.provider == "hindsight")
            assert prefetch.status in ("fresh", "stale") and not prefetch.text
        start = time.perf_counter()
        agent.close()
        closing = time.perf_counter() - start
    # a turn waits for the 0.3 s prefetch deadline and a loopback LLM call, never for the
    # provider's own timeouts (10 s to connect, 20 s to recall): a bound far from both sides, so
    # a loaded machine does not decide the outcome
    assert max(seconds) < 5, seconds
    assert closing < 10, closing
    spool = hermes_home / "hindsight" / f"spool-{bank}.jsonl"
    assert len(spool.read_text().splitlines()) == 4, "every turn kept for later, none lost"


def test_spooled_turns_reach_the_server_once_it_answers(server, hermes_home, bank, api_key_env):
    # a previous run could not reach the server and left its turns in the spool
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    offline = make_instance(HindsightMemory, "memory-provider", hermes_home,
                            config=config_text(dead, bank, "  shutdown_timeout: 0.5\n"))
    from hermes_core.types import Message

    user = Message("user", "Our cluster is named aurora-7 and lives in eu-west-2.")
    reply = Message("assistant", "Noted.")
    offline.sync_turn(user, reply, Session(id="offline-1"), [user, reply])
    offline.shutdown()
    assert (hermes_home / "hindsight" / f"spool-{bank}.jsonl").exists()

    online = make_instance(HindsightMemory, "memory-provider", hermes_home,
                           config=config_text(server.base_url, bank))
    user2 = Message("user", "Back online.")
    online.sync_turn(user2, reply, Session(id="online-1"), [user2, reply])
    settled(online)
    assert not (hermes_home / "hindsight" / f"spool-{bank}.jsonl").exists()
    found = online.client.recall(bank, "what is the cluster called", types=["world"])
    assert any("aurora-7" in m.text for m in found)
    online.shutdown()


def test_the_server_lists_every_user_bank(server, bank):
    """``forget`` for everyone finds the per-user banks through the server's bank listing."""
    from hermes_core_hindsight.config import user_bank

    client = HindsightClient(server.base_url, api_key=API_KEY)
    try:
        names = {user_bank(bank, user) for user in ("alice", "bob")}
        for name in sorted(names):
            client.retain(name, [{"content": "I drink jasmine tea every morning."}])
        settle_bank(server.base_url, bank)
        listed = client.bank_ids(search=f"{bank}.user.", page=1)  # one bank per page
        assert names <= set(listed)
    finally:
        client.close()


def test_wrong_api_key_is_refused_with_a_hint(server, hermes_home, bank, monkeypatch):
    monkeypatch.setenv("HINDSIGHT_API_KEY", "not-the-key")
    provider = make_instance(HindsightMemory, "memory-provider", hermes_home,
                             config=config_text(server.base_url, bank))
    with pytest.raises(HindsightRejected, match="HINDSIGHT_API_KEY") as info:
        provider.client.recall(bank, "anything")
    assert info.value.status == 401
    provider.shutdown()


def test_degraded_server_without_llm(degraded_server, hermes_home, bank):
    provider = make_instance(HindsightMemory, "memory-provider", hermes_home,
                             config=config_text(degraded_server.base_url, bank,
                                                "  recall_types: [observation]\n"))
    assert provider.server_info().observations is False
    # observations were asked for, but the server has none: world and experience instead
    assert provider.recall_types() == ["world", "experience"]
    reflect = next(t for t in provider.get_tools() if t.name == "hindsight_reflect")
    with pytest.raises(ToolError, match="runs without an LLM"):
        reflect.invoke({"query": "what did I fix?"}, ToolContext(session=Session(id="x")))
    provider.shutdown()


def test_reflect_with_the_mock_llm(server, hermes_home, bank, api_key_env):
    provider = make_instance(HindsightMemory, "memory-provider", hermes_home,
                             config=config_text(server.base_url, bank))
    reflect = next(t for t in provider.get_tools() if t.name == "hindsight_reflect")
    # Hindsight's built-in mock LLM always answers this text
    assert "mock response" in reflect.invoke({"query": "what did I fix?"}, ToolContext())
    assert provider.server_info().observations is True
    assert provider.recall_types() == ["world", "experience", "observation"]
    provider.shutdown()
