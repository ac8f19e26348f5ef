"""session_search: grouping, limits, lineage exclusion, windows, summaries (against a loopback
Messages API server: the model's words are the only fake), and the provider inside a PluginHost."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from archive_support import make_archive
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_core.config import parse_config_text
from hermes_core.errors import ToolError
from hermes_core.host import PluginHost
from hermes_core.plugins.llm import anthropic as anthropic_plugin
from hermes_core.plugins.llm.anthropic import AnthropicClient
from hermes_core.plugins.memory import session_archive as plugin
from hermes_core.plugins.memory.session_archive import (
    ArchiveWriteError,
    SessionArchive,
    session_search,
)
from hermes_core.plugins.memory.session_archive.summarise import summarise_results
from hermes_core.plugins.memory.session_archive.window import place_window, share_budget
from hermes_core.testing import MemoryProviderConformance, make_instance
from hermes_core.types import EndReason, Message, Session, SwitchReason, ToolContext, Usage


def fill(a: SessionArchive) -> None:
    """Chain a1 -> a2 (compaction) with a branch; five other sessions; one cron session."""
    a.open_session(Session(id="a1", title="Gateway work"))
    a.append_messages("a1", [Message("user", "the gateway returns 502 errors"),
                             Message("assistant", "let us check the gateway upstream")])
    a.open_session(Session(id="a2", parent_session_id="a1"), origin="compression")
    a.append_messages("a2", [Message("user", "gateway fixed by raising keepalive")])
    a.open_session(Session(id="a3", parent_session_id="a2"), origin="branch")
    a.append_messages("a3", [Message("user", "gateway branch experiment")])
    for i in range(5):
        sid = f"s{i}"
        a.open_session(Session(id=sid, title=f"Session {i}"))
        filler = [Message("user", f"unrelated chatter number {j} about lunch") for j in range(i)]
        a.append_messages(sid, [*filler, Message("user", f"gateway mention {i}" + " gateway" * i),
                                Message("assistant", f"reply {i}")])
    a.open_session(Session(id="cron1", platform="cron", title="Nightly"))
    a.append_messages("cron1", [Message("user", "gateway gateway gateway gateway gateway")])


@pytest.fixture
def archive(tmp_path: Path, storage_url: str | None) -> Iterator[SessionArchive]:
    """The filled archive on each backend: the SQLite file, then a PostgreSQL database."""
    a = make_archive(tmp_path, storage_url)
    fill(a)
    yield a
    a.close()


def ids(result: dict[str, Any]) -> list[str]:
    return [r["session_id"] for r in result["results"]]


# ------------------------------------------------------------------------ grouping and limits


def test_default_three_sessions_and_limit_five(archive: SessionArchive) -> None:
    result = session_search(archive, "gateway", current_session_id="s0")
    assert result["count"] == 3 and result["mode"] == "search"
    assert len(session_search(archive, "gateway", current_session_id="s0", limit=5)["results"]) == 5
    assert result["sessions_matched"] >= 6


def test_a_compaction_chain_is_one_result_under_its_newest_session(archive: SessionArchive) -> None:
    result = session_search(archive, "gateway AND (502 OR upstream OR keepalive)",
                            current_session_id="s0", limit=5)
    chain = [r for r in result["results"] if r["session_id"] == "a2"]
    assert chain and chain[0]["matches"] == 3 and chain[0]["title"] == "Gateway work #2"
    assert "a1" not in ids(result)
    texts = [m["content"] for m in chain[0]["window"]["messages"]]
    assert texts[0] == "the gateway returns 502 errors"  # the window spans the whole chain
    assert texts[-1] == "gateway fixed by raising keepalive"


@pytest.mark.parametrize("current", ["a1", "a2", "a3"])
def test_the_current_lineage_is_left_out_both_ways(archive: SessionArchive, current: str) -> None:
    result = session_search(archive, "gateway", current_session_id=current, limit=5)
    assert not {"a1", "a2", "a3"} & set(ids(result))
    assert {h["session_id"] for r in result["results"] for h in r["hits"]}.isdisjoint(
        {"a1", "a2", "a3"})


def test_cron_sessions_come_after_the_others(archive: SessionArchive) -> None:
    result = session_search(archive, "gateway", current_session_id="a1", limit=5)
    assert "cron1" not in ids(result)  # it would rank first on term frequency
    everything = session_search(archive, "gateway", current_session_id="a1", limit=5,
                                demote_platforms=())
    assert ids(everything)[0] == "cron1"


def test_demoted_conversations_go_last_however_far_down_the_others_rank(
        tmp_path: Path, storage_url: str | None) -> None:
    """The conversations' records are read a batch at a time while choosing: 70 cron sessions
    that outrank every other (more than one batch) still come after the ones ranked below."""
    a = make_archive(tmp_path, storage_url)
    for i in range(70):
        a.open_session(Session(id=f"cron{i}", platform="cron"))
        a.append_messages(f"cron{i}", [Message("user", "zephyr zephyr zephyr")])
    for i in range(2):
        a.open_session(Session(id=f"chat{i}", platform="cli"))
        a.append_messages(f"chat{i}", [Message(
            "user", "one zephyr report among the many other words of a longer message")])
    shown = ids(session_search(a, "zephyr", limit=3))
    assert shown[:2] == ["chat1", "chat0"] or shown[:2] == ["chat0", "chat1"]
    assert shown[2].startswith("cron")
    everything = ids(session_search(a, "zephyr", limit=3, demote_platforms=()))
    assert all(s.startswith("cron") for s in everything)  # they do rank first
    a.close()


def test_hits_carry_a_snippet_and_one_message_of_context(archive: SessionArchive) -> None:
    result = session_search(archive, "keepalive", current_session_id="s0")
    (r,) = result["results"]
    (hit,) = r["hits"]
    assert "keepalive" in hit["snippet"] and hit["session_id"] == "a2"
    assert "context_before" not in hit  # first message of its session
    # a large result budget puts the neighbours on each hit ...
    result = session_search(archive, "upstream", current_session_id="s0", result_chars=100_000)
    hit = result["results"][0]["hits"][0]
    assert hit["context_before"]["content"] == "the gateway returns 502 errors"
    # ... the default (16k) shows them once, in the window, not again on every hit
    result = session_search(archive, "upstream", current_session_id="s0")
    hit = result["results"][0]["hits"][0]
    assert "context_before" not in hit
    contents = [m["content"] for m in result["results"][0]["window"]["messages"]]
    assert "the gateway returns 502 errors" in contents


def test_empty_query_lists_recent_sessions_without_the_current_lineage(
    archive: SessionArchive,
) -> None:
    result = session_search(archive, "  ", current_session_id="s4")
    assert result["mode"] == "recent"
    listed = [s["session_id"] for s in result["sessions"]]
    assert "s4" not in listed and "a1" not in listed and len(listed) == 5
    assert listed[0] == "cron1"  # newest first
    a2 = session_search(archive, "", current_session_id="s4", limit=5)
    assert all(s["preview"] for s in a2["sessions"])


def test_no_match_says_so_and_bad_queries_raise(archive: SessionArchive) -> None:
    result = session_search(archive, "xylophone", current_session_id="s0")
    assert result["count"] == 0 and "No earlier session" in result["note"]
    with pytest.raises(plugin.QueryError):
        session_search(archive, "???", current_session_id="s0")


# ------------------------------------------------------------------------------- windows


def brute_best(lengths: list[int], hits: list[int], budget: int) -> int:
    best = 0
    for s in range(len(lengths)):
        for e in range(s + 1, len(lengths) + 1):
            if sum(lengths[s:e]) <= budget:
                best = max(best, sum(1 for h in set(hits) if s <= h < e))
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.data())
def test_window_covers_the_most_matches_within_the_budget(lengths: list[int], data: Any) -> None:
    hits = data.draw(st.lists(st.integers(0, len(lengths) - 1), max_size=10, unique=True))
    budget = data.draw(st.integers(1, 400))
    start, end = place_window(lengths, hits, budget)
    assert 0 <= start < end <= len(lengths)
    inside = sum(1 for h in hits if start <= h < end)
    if sum(lengths[start:end]) > budget:
        assert end - start == 1  # only a single message too big for the budget
        assert not hits or start == hits[0]
    else:
        assert inside == brute_best(lengths, hits, budget)
        # what is left of the budget could not take a neighbour
        used = sum(lengths[start:end])
        assert start == 0 or used + lengths[start - 1] > budget
        assert end == len(lengths) or used + lengths[end] > budget
    if hits and inside and brute_best(lengths, hits[:1], budget) == 1:
        pass  # the best hit is preferred among windows with equal counts (checked below)


def test_window_prefers_the_best_ranked_match_among_equals() -> None:
    lengths = [10] * 10
    assert place_window(lengths, [8, 1], 30) == (6, 9) or place_window(lengths, [8, 1], 30)[0] <= 8
    start, end = place_window(lengths, [8, 1], 30)
    assert start <= 8 < end


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=6), st.integers(0, 20000))
def test_budget_shares_never_exceed_the_total_or_a_need(needs: list[int], total: int) -> None:
    shares = share_budget(needs, total)
    assert sum(shares) <= total
    assert all(0 <= s <= n for s, n in zip(shares, needs, strict=True))
    if sum(needs) <= total:
        assert shares == needs


def test_the_window_of_a_long_session_sits_on_its_matches(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db") as a:
        msgs = [Message("user", f"padding message {i} " + "x" * 300) for i in range(300)]
        for i in (250, 255, 260):
            msgs[i] = Message("assistant", f"the flamingo incident {i} " + "y" * 300)
        msgs[20] = Message("assistant", "one early flamingo")
        a.append_messages("long", msgs)
        a.open_session("me")
        result = session_search(a, "flamingo", current_session_id="me", window_chars=4000)
        window = result["results"][0]["window"]
        shown = [m["id"] for m in window["messages"]]
        matched = [m["id"] for m in window["messages"] if m.get("match")]
        assert len(matched) == 3 and window["messages_before"] > 200
        assert sum(len(m["content"]) + 40 for m in window["messages"]) <= 4000 + 200
        assert len(shown) + window["messages_before"] + window["messages_after"] == 300


def test_windows_share_one_budget(archive: SessionArchive, tmp_path: Path) -> None:
    result = session_search(archive, "gateway", current_session_id="s0", limit=5,
                            window_chars=2000)
    total = sum(len(m["content"]) + 40 for r in result["results"]
                for m in r["window"]["messages"])
    assert total <= 2000 + 40 * 5


def test_a_huge_message_is_cut_around_its_match(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db") as a:
        a.append_message("big", Message("tool", "z" * 900_000 + " the pelican line " + "z" * 1000))
        result = session_search(a, "pelican", current_session_id="me")
        (m,) = result["results"][0]["window"]["messages"]
        assert "pelican" in m["content"] and len(m["content"]) < 6200
        assert "characters before" in m["content"]


# ------------------------------------------------------------------------------ summaries


class FakeMessagesAPI:
    """A loopback Messages API: POST /v1/messages answers with a JSON Message.

    Only the model's words are fake; the SDK, HTTP and JSON are real.
    """

    def __init__(self, mode: str = "ok", delay: float = 0.0) -> None:
        self.mode, self.delay = mode, delay
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        #: the first ``hold_first`` requests wait for each other (bounded), so how many a client
        #: keeps in flight shows whatever the machine's load does to its threads' timing
        self.hold_first = 0
        self.lock = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with api.lock:
                    api.requests.append(body)
                    api.in_flight += 1
                    api.max_in_flight = max(api.max_in_flight, api.in_flight)
                    api.lock.notify_all()
                    if len(api.requests) <= api.hold_first:
                        api.lock.wait_for(lambda: api.in_flight >= api.hold_first, timeout=10)
                try:
                    time.sleep(api.delay)
                finally:
                    # counted out before answering: the client sends its next request only
                    # after reading this answer, so the count never includes a finished one
                    with api.lock:
                        api.in_flight -= 1
                if api.mode == "error":
                    self._send(500, {"type": "error", "error": {"type": "api_error",
                                                                "message": "boom"}})
                    return
                text = "" if api.mode == "empty" else (
                    "SUMMARY: " + prompt_text(body).split("\n")[0])
                self._send(200, {
                    "id": "msg_1", "type": "message", "role": "assistant",
                    "model": body["model"], "stop_reason": "end_turn",
                    "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5},
                    "content": [{"type": "text", "text": text}] if text else [],
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def prompt_text(body: dict[str, Any]) -> str:
    """The first message's text, sent as a string or as content blocks (the client's form)."""
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    server = FakeMessagesAPI()
    yield server
    server.close()


def llm(url: str, key: str | None = "test-key", aux: str | None = "claude-aux") -> AnthropicClient:
    """The auxiliary client as the host builds it: its model is the auxiliary one."""
    return AnthropicClient(api_key=key, base_url=url, model=aux, max_retries=0)


def results_for(archive: SessionArchive) -> list[dict[str, Any]]:
    return session_search(archive, "gateway", current_session_id="s0", limit=5)["results"]


def test_summaries_replace_windows(archive: SessionArchive, api: FakeMessagesAPI) -> None:
    results = results_for(archive)
    assert summarise_results(results, "gateway", llm(api.url)) is None
    assert all(r["summary"].startswith("SUMMARY: Search query: gateway") for r in results)
    assert all("window" not in r and r["hits"] for r in results)
    assert len(api.requests) == 5 and {r["model"] for r in api.requests} == {"claude-aux"}
    assert "gateway" in prompt_text(api.requests[0])


def test_the_main_model_is_used_without_an_auxiliary_one(
    archive: SessionArchive, api: FakeMessagesAPI
) -> None:
    results = results_for(archive)[:1]
    summarise_results(results, "gateway", AnthropicClient(api_key="k", base_url=api.url, model="big"))
    assert api.requests[0]["model"] == "big"


def test_at_most_three_requests_in_flight(archive: SessionArchive, api: FakeMessagesAPI) -> None:
    api.hold_first = 3  # the first three meet at the server, then take 0.3 s more each: a
    api.delay = 0.3     # client allowing a fourth at once would send it meanwhile
    results = results_for(archive)
    assert summarise_results(results, "gateway", llm(api.url), timeout=30) is None
    assert api.max_in_flight == 3 and len(api.requests) == 5


@pytest.mark.parametrize("mode", ["error", "empty"])
def test_a_failed_summary_falls_back_to_the_excerpt(
    archive: SessionArchive, api: FakeMessagesAPI, mode: str
) -> None:
    api.mode = mode
    results = results_for(archive)
    note = summarise_results(results, "gateway", llm(api.url))
    assert note and "5 of 5 summaries failed" in note
    assert all("window" in r and "summary" not in r for r in results)


def test_the_overall_timeout_bounds_the_batch(archive: SessionArchive, api: FakeMessagesAPI) -> None:
    api.delay = 3.0
    results = results_for(archive)
    start = time.monotonic()
    note = summarise_results(results, "gateway", llm(api.url), timeout=0.5)
    assert time.monotonic() - start < 2.0
    assert note and "timed out" in note
    assert all("window" in r for r in results)


def test_a_call_timing_out_before_the_batch_is_reported_as_timed_out(
        archive: SessionArchive, api: FakeMessagesAPI) -> None:
    """Under load a call's own deadline (the same bound) can fire before the batch's: the note
    says "timed out" either way (it named the client's error before)."""
    api.delay = 3.0
    client = llm(api.url)

    class CallDeadlineFirst:  # the real client, each call's own deadline shorter than the batch's
        def complete(self, **kwargs: Any) -> str:
            return client.complete(**{**kwargs, "timeout": 0.2})

    results = results_for(archive)
    note = summarise_results(results, "gateway", CallDeadlineFirst(), timeout=2.5)  # type: ignore[arg-type]
    assert note and "timed out" in note and f"{len(results)} of {len(results)}" in note
    assert all("window" in r for r in results)


def test_no_key_means_no_request_and_raw_excerpts(
    archive: SessionArchive, api: FakeMessagesAPI
) -> None:
    results = results_for(archive)
    note = summarise_results(results, "gateway", llm(api.url, key=None))
    assert note and "no API key" in note and api.requests == []
    assert all("window" in r for r in results)


# ----------------------------------------------------------------------- the provider in a host


def host_with_archive(home: Path, extra: str = "") -> PluginHost:
    config = parse_config_text(
        "memory:\n  providers: [session_archive]\n" + extra, home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("session_archive", plugin),
                                                       ("anthropic", anthropic_plugin)])
    host.activate_memory_providers()
    return host


def test_the_provider_follows_a_turn_and_a_compaction(home: Path) -> None:
    host = host_with_archive(home)
    (provider,) = host.instances.values()
    s1 = Session(id="t1", title="Weekend plans", platform="cli")
    host.hooks.on_session_switch(new_session=s1, old_session=None, reason=SwitchReason.NEW)
    for m in (Message("user", "book a table at Luigi's"), Message("assistant", "Booked for 8pm")):
        assert not any(o.error for o in host.hooks.on_message(message=m, session=s1))
    s2 = Session(id="t2", parent_session_id="t1")
    host.hooks.on_session_switch(new_session=s2, old_session=s1,
                   reason=SwitchReason.COMPRESSION)
    host.hooks.on_message(message=Message("user", "and a taxi"), session=s2)
    provider.record_usage("t2", Usage(input_tokens=50, output_tokens=7), cost_usd=0.01)
    host.hooks.on_session_end(session=s2, messages=[], reason=EndReason.USER_EXIT)
    archive = provider.archive
    t1, t2 = archive.get_session("t1"), archive.get_session("t2")
    assert (t1.end_reason, t1.superseded) == ("compression", True)
    assert (t2.end_reason, t2.title, t2.input_tokens) == ("user_exit", "Weekend plans #2", 50)
    assert [m.content for m in archive.messages("t1")] == ["book a table at Luigi's",
                                                           "Booked for 8pm"]
    tools = host.tools()
    tool, owner = tools["session_search"]
    assert owner == "memory-provider:session_archive" and tool.parallel_safe
    other = Session(id="t9")
    found = json.loads(tool.invoke({"query": "Luigi's table"}, ToolContext(session=other)))
    assert found["results"][0]["session_id"] == "t2"
    mine = json.loads(tool.invoke({"query": "Luigi's table"}, ToolContext(session=s2)))
    assert mine["count"] == 0  # the current lineage is left out
    with pytest.raises(ToolError, match="no letters or digits"):
        tool.invoke({"query": "?!"}, ToolContext(session=other))
    with pytest.raises(ToolError, match="limit"):
        tool.invoke({"query": "taxi", "limit": 9}, ToolContext(session=other))
    host.shutdown()


def test_the_provider_summarises_when_configured(home: Path, api: FakeMessagesAPI) -> None:
    host = host_with_archive(home, f"llm:\n  api_key: k\n  model: claude-test\n  base_url: {api.url}\n"
                                   "session_archive:\n  summaries: true\n")
    (provider,) = host.instances.values()
    fill(provider.archive)
    tool, _ = host.tools()["session_search"]
    out = json.loads(tool.invoke({"query": "keepalive"}, ToolContext(session=Session(id="s0"))))
    assert out["results"][0]["summary"].startswith("SUMMARY:")
    host.shutdown()


def test_a_corrupt_state_db_is_reported_and_left_alone(home: Path, caplog: Any) -> None:
    db = home / "state.db"
    db.write_bytes(b"garbage" * 1000)
    host = host_with_archive(home)
    assert "left untouched" in caplog.text
    # The provider starts without an archive, so no message is lost silently: each one raises a
    # clear error to the turn and waits in the spool until the file is repaired.
    (provider,) = host.instances.values()
    with pytest.raises(ArchiveWriteError, match=r"left untouched.*kept in .*state\.db\.spool"):
        provider.on_message(Message("user", "remember the anchor"), Session(id="s1"))
    assert db.read_bytes() == b"garbage" * 1000
    host.shutdown()
    db.unlink()  # the user repaired it (here: moved the junk aside); the spool is stored
    with SessionArchive(db) as archive:
        assert [m.content for m in archive.messages("s1")] == ["remember the anchor"]
    assert not (home / "state.db.spool.jsonl").exists()  # removed once empty


class TestSessionArchiveConformance(MemoryProviderConformance):
    tool_examples = {"session_search": {"query": "tea"}}

    @pytest.fixture
    def provider(self, hermes_home: Path) -> Any:
        return make_instance(plugin.SessionArchiveProvider, "memory-provider", hermes_home)


def test_a_title_matches_its_conversation_first(archive: SessionArchive) -> None:
    for query in ("Gateway work", "gateway WORK", '"Gateway work #2"', "`gateway work`"):
        result = session_search(archive, query, current_session_id="s0")
        first = result["results"][0]
        assert first["session_id"] == "a2" and first.get("title_match"), query
    titled = session_search(archive, "nightly", current_session_id="s0")
    first = titled["results"][0]  # a cron session, but asked for by its title
    assert first["session_id"] == "cron1" and first["hits"] == []  # no message says "nightly"
    assert first["window"]["messages"][0]["content"].startswith("gateway gateway")
    # the current lineage is never offered, even by title
    mine = session_search(archive, "Gateway work", current_session_id="a3")
    assert "a2" not in ids(mine)
