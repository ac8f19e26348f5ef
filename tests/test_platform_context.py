"""compression.platform: the model platform's own context management, end to end.

Real parts: a real PluginHost with the session archive writing a real state.db, the compressor,
the real anthropic SDK talking to the loopback Messages API server. Only the model's words are
scripted (the server's script); the server applies context editing by its documented model of the
platform's rule (hermes_core.testing.context_model), not by the platform itself.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest

from hermes_core import hookimpl
from hermes_core.agent import Agent
from hermes_core.errors import ConfigError, HermesCoreError
from hermes_core.kinds import LLMClient, MemoryProvider, Tool
from hermes_core.plugins.memory.session_archive.tool import session_search
from hermes_core.testing import MessagesAPIServer, Reply, make_host
from hermes_core.testing.context_model import CLEARED, apply_context_management
from hermes_core.types import Message

SECRET = "ZEBRA-4471 is the flaky shard"


class Fetch:
    """A tool plugin whose results are long: what context editing clears."""

    @hookimpl
    def register_tools(self, register):
        def handler(args: dict[str, Any], context: Any) -> str:
            page = str(args.get("page", ""))
            body = SECRET if page == "1" else f"page {page} of the build log"
            return f"{body}. " + "log line " * 400

        register(Tool(name="fetch", description="Fetch a page of the build log.", handler=handler,
                      parameters={"type": "object", "properties": {"page": {"type": "string"}}}))


def config(api: MessagesAPIServer, platform: str = "", extra: str = "") -> str:
    return ("memory:\n  providers: [session_archive]\ncontext:\n  engine: compressor\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            f"  max_retries: 0\n  timeout: 20\n{extra}compression:\n  summary_timeout: 5\n"
            f"{platform}")


ARCHIVE_ONLY = "memory:\n  providers: [session_archive]\ncontext:\n  engine: compressor\n"
EDITING = ("  platform:\n    features: [clear_tool_uses_20250919]\n"
           "    clear_trigger_tokens: 2000\n    keep_tool_uses: 2\n")


def host(home: Path, api: MessagesAPIServer, platform: str = "", extra: str = ""):
    return make_host(home, plugins=[("fetch", Fetch())], config=config(api, platform, extra))


def fetch_then_answer(pages: int) -> list[Reply]:
    script = []
    for page in range(1, pages + 1):
        script += [Reply(tool_calls=[{"name": "fetch", "input": {"page": str(page)}}]),
                   Reply(text=f"read page {page}")]
    return script


def fetcher(body: dict[str, Any]) -> Reply:
    """A responder: a summary request (no tools) gets a summary; a request ending with a tool
    result gets an answer; a user's request gets a fetch of the page it names."""
    if not body.get("tools"):
        return Reply(text="## Goal\nread the build log")
    last = body["messages"][-1]["content"]
    blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
    if any(b.get("type") == "tool_result" for b in blocks):
        return Reply(text="done reading")
    page = next(b["text"] for b in blocks if b.get("type") == "text").split()[-1]
    return Reply(tool_calls=[{"name": "fetch", "input": {"page": page}}])


def test_the_edits_go_out_as_the_sdk_types_define_them(hermes_home):
    from anthropic.types.beta.beta_clear_tool_uses_20250919_edit_param import (
        BetaClearToolUses20250919EditParam,
    )
    from anthropic.types.beta.beta_compact_20260112_edit_param import BetaCompact20260112EditParam

    settings = ("  platform:\n    features: [clear_tool_uses_20250919, compact_20260112]\n"
                "    clear_trigger_tokens: 30000\n    keep_tool_uses: 4\n"
                "    clear_at_least_tokens: 5000\n    exclude_tools: [memory]\n"
                "    compaction_trigger_tokens: 160000\n    compaction_instructions: keep paths\n")
    with MessagesAPIServer(["hello"]) as api:
        agent = Agent.create(host(hermes_home, api, settings))
        agent.run_turn("hi")
        agent.close()
        (request,) = [r for r in api.requests if r.path == "/v1/messages"]
    clear, compact = request.body["context_management"]["edits"]
    assert clear == {"type": "clear_tool_uses_20250919",
                     "trigger": {"type": "input_tokens", "value": 30000},
                     "keep": {"type": "tool_uses", "value": 4},
                     "clear_at_least": {"type": "input_tokens", "value": 5000},
                     "exclude_tools": ["memory"]}
    assert compact == {"type": "compact_20260112", "instructions": "keep paths",
                       "trigger": {"type": "input_tokens", "value": 160000}}
    # every key is one the SDK's TypedDict declares, every value of its declared literal type
    for edit, typed in ((clear, BetaClearToolUses20250919EditParam),
                        (compact, BetaCompact20260112EditParam)):
        hints = typing.get_type_hints(typed)
        assert set(edit) <= set(hints)
        assert edit["type"] in typing.get_args(hints["type"])
    betas = set(request.headers["anthropic-beta"].split(","))
    assert betas == {"context-management-2025-06-27", "compact-2026-01-12"}


def test_context_editing_clears_on_the_server_but_the_archive_keeps_everything(hermes_home):
    with MessagesAPIServer(fetch_then_answer(5)) as api:
        agent = Agent.create(host(hermes_home, api, EDITING))
        for page in range(1, 6):
            agent.run_turn(f"read page {page}")
        session_id = agent.session.id
        agent.close()
        bodies = api.bodies
    assert all(b["context_management"]["edits"][0]["type"] == "clear_tool_uses_20250919"
               for b in bodies)
    # the kernel sends every tool result as it saw it; the server's model cleared the old ones
    last = bodies[-1]
    sent = [b["content"] for m in last["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]
    assert len(sent) == 5 and SECRET in sent[0]
    read, applied = apply_context_management(last)
    kept = [b["content"] for m in read["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]
    assert kept[:3] == [CLEARED] * 3 and SECRET not in str(kept)
    assert applied[0]["cleared_tool_uses"] == 3
    # no local compaction ran: one session, whole history
    assert len(agent.history) == 5 * 4

    reopened = make_host(hermes_home, config=ARCHIVE_ONLY)
    try:
        reopened.activate_memory_providers()
        (archive,) = reopened.instances.values()
        found = session_search(archive.archive, "ZEBRA-4471")
        assert SECRET in str(found)
        assert session_id in str(found)
    finally:
        reopened.shutdown()


def test_a_server_compaction_block_continues_in_a_child_session(hermes_home):
    script = [Reply(tool_calls=[{"name": "fetch", "input": {"page": "1"}}]),
              Reply(text="first answer"),
              Reply(compaction="Summary: page 1 names ZEBRA-4471.", text="compacted; go on",
                    tool_calls=[{"name": "fetch", "input": {"page": "2"}}]),
              Reply(text="second answer"),
              "third answer"]
    settings = "  platform:\n    features: [compact_20260112]\n"
    switches: list[tuple[str, str | None, str]] = []

    class Watch(MemoryProvider):
        name = "watch"

        @hookimpl
        def on_session_switch(self, new_session, old_session, reason):
            switches.append((new_session.id, old_session.id if old_session else None, str(reason)))

    class Register:
        @hookimpl
        def register_memory_providers(self, register):
            register(Watch)

    with MessagesAPIServer(script) as api:
        text = config(api, settings).replace("[session_archive]", "[session_archive, watch]")
        h = make_host(hermes_home, plugins=[("fetch", Fetch()), ("watch", Register())], config=text)
        agent = Agent.create(h)
        first = agent.session.id
        agent.run_turn("read page 1")
        result = agent.run_turn("read page 2")
        child = agent.session.id
        agent.run_turn("and now?")
        agent.close()  # drains the queued session switches
        bodies = api.bodies
    (record,) = result.compactions
    assert record.trigger == "server" and record.old_session_id == first
    assert record.new_session_id == child != first
    assert record.summary == "Summary: page 1 names ZEBRA-4471."
    assert (child, first, "compression") in switches
    # the block goes back verbatim, ahead of the reply, in every later request
    sent = bodies[3]["messages"]
    assert sent[0]["role"] == "user" and sent[0]["content"][0]["text"].startswith("read page 2")
    block = sent[1]["content"][0]
    assert block.get("type") == "compaction", sent[1]
    assert {k: block[k] for k in ("type", "content", "encrypted_content")} == {
        "type": "compaction", "content": "Summary: page 1 names ZEBRA-4471.",
        "encrypted_content": "opaque-test-state"}
    assert bodies[4]["messages"][1]["content"][0]["type"] == "compaction"

    reopened = make_host(hermes_home, config=ARCHIVE_ONLY)
    try:
        reopened.activate_memory_providers()
        (archive,) = reopened.instances.values()
        assert archive.archive.get_session(child).parent_session_id == first
        old = [m.content for m in archive.archive.messages(first)]
        assert any(SECRET in text for text in old)  # the compacted turns stay archived
        assert SECRET in str(session_search(archive.archive, "ZEBRA-4471"))
    finally:
        reopened.shutdown()


def test_a_refused_feature_falls_back_to_the_local_path(hermes_home):
    # the window is tiny so the local compressor must act once the platform is refused
    extra = "  context_window: 8000\n"
    with MessagesAPIServer(fetcher, refuse_context_management=True) as api:
        h = host(hermes_home, api, EDITING + "  protect_last_n: 2\n", extra=extra)
        agent = Agent.create(h)
        engine = agent.engine
        results = [agent.run_turn(f"read page {page}") for page in range(1, 7)]
        agent.close()
        requests = [r for r in api.requests if r.path == "/v1/messages"]
    # the first call carried the edits and got a 400 naming the field; the same call went again
    # without them, and no later call carried them
    assert requests[0].status == 400 and "context_management" in requests[0].body
    assert requests[1].status == 200 and "context_management" not in requests[1].body
    assert all("context_management" not in r.body for r in requests[1:])
    assert results[0].reply == "done reading"
    assert engine.policy.platform is None and "refused" in engine.platform_off
    assert any(r.compactions for r in results)  # the local compressor took over


def test_count_tokens_is_asked_with_the_edits_and_its_figure_used(hermes_home):
    from hermes_core.testing.context_model import rough_tokens

    with MessagesAPIServer(fetcher) as api:
        # a small window and a high threshold: the history is in the band where the engine
        # counts (80 % of the threshold and up) but the server's count stays under it
        settings = ("  threshold: 0.9\n  platform:\n    features: [clear_tool_uses_20250919]\n"
                    "    clear_trigger_tokens: 500\n    keep_tool_uses: 1\n")
        h = host(hermes_home, api, settings,
                 extra="  context_window: 2800\nanthropic:\n  count_tokens: true\n")
        agent = Agent.create(h)
        engine = agent.engine
        agent.run_turn("read page 1")
        agent.run_turn("read page 2")
        engine.policy.usage_stale = True  # as after a compaction: the last report is stale
        history = list(agent.history)
        size = engine.policy.tokens(history)
        assert engine.policy.should_compress(history, None) is False
        counts = [r for r in api.requests if r.path.endswith("/count_tokens")]
        agent.close()
    assert counts, "count_tokens was never asked"
    request = counts[-1]
    assert request.body["context_management"]["edits"][0]["type"] == "clear_tool_uses_20250919"
    assert "context-management-2025-06-27" in request.headers["anthropic-beta"]
    read, _ = apply_context_management(request.body)
    # the server's figure after its edits (the loopback counts the system prompt too), not the
    # local estimate of the uncleared history
    assert size == rough_tokens(read) + engine.overhead_tokens
    assert size < rough_tokens(request.body) + engine.overhead_tokens


def test_a_feature_the_sdk_does_not_know_is_refused_at_start(hermes_home):
    import anthropic

    settings = "  platform:\n    features: [compact_20990101]\n"
    with MessagesAPIServer([]) as api, pytest.raises(HermesCoreError) as caught:
        Agent.create(host(hermes_home, api, settings))
    text = str(caught.value)
    assert "compact_20990101" in text and anthropic.__version__ in text
    assert "newer anthropic SDK" in text


def test_other_clients_report_it_unsupported_and_the_local_path_runs():
    class Plain(LLMClient):
        name = "plain"

    why = Plain.__new__(Plain).platform_context([{"type": "clear_tool_uses_20250919"}],
                                                lambda why: None)
    assert why is not None and "no platform context management" in why


def test_unknown_keys_in_the_section_are_refused():
    from hermes_core.plugins.context_engine.compressor import CompressorConfig

    with pytest.raises(ValueError, match="context_edting"):
        CompressorConfig.model_validate({"platform": {"context_edting": True}})
    with pytest.raises(ValueError, match="twice"):
        CompressorConfig.model_validate({"platform": {"features": ["compact_20260112"] * 2}})


def test_the_server_model_keeps_what_it_declares():
    body = {"messages": [
        {"role": "user", "content": "go"},
        *[m for n in range(4) for m in (
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "fetch",
                                               "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                          "content": "x" * 4000}]})]],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919",
                                          "trigger": {"type": "input_tokens", "value": 100},
                                          "keep": {"type": "tool_uses", "value": 1},
                                          "clear_at_least": {"type": "input_tokens",
                                                             "value": 100_000}}]}}
    assert apply_context_management(body)[1] == []  # would clear too little: nothing cleared
    body["context_management"]["edits"][0]["clear_at_least"]["value"] = 10
    _read, (applied,) = apply_context_management(body)
    assert applied["cleared_tool_uses"] == 3 and applied["cleared_input_tokens"] > 2500
    assert body["messages"][2]["content"][0]["content"] == "x" * 4000  # the input is untouched


def test_a_compaction_block_round_trips_in_the_request_builder():
    from hermes_core.anthropic_request import to_anthropic_messages

    block = {"type": "compaction", "content": "sum", "encrypted_content": "e"}
    out = to_anthropic_messages([Message("user", "hi"),
                                 Message("assistant", "ok", meta={"compaction": block})])
    assert out[1]["content"] == [block, {"type": "text", "text": "ok"}]


def test_config_error_names_the_sdk_version_without_a_server():
    from hermes_core.plugins.llm.anthropic.platform import check_edits, sdk_edit_names

    version, known = sdk_edit_names()
    assert {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"} <= set(known)
    with pytest.raises(ConfigError, match=version):
        check_edits([{"type": "clear_everything_20300101"}])


def test_a_streamed_response_carries_its_compaction_block():
    from hermes_core.plugins.llm.anthropic import AnthropicClient

    with MessagesAPIServer([Reply(compaction="the summary", text="go on", chunk_size=2)]) as api:
        client = AnthropicClient(api_key="test", base_url=api.base_url, model="claude-test",
                                 max_retries=0)
        assert client.platform_context([{"type": "compact_20260112"}], lambda why: None) is None
        shown: list[str] = []
        response = client.respond(system="s", messages=[Message("user", "hi")], max_tokens=50,
                                  on_text=shown.append)
        client.close()
        (request,) = api.requests
    assert request.headers["anthropic-beta"] == "compact-2026-01-12"
    assert "".join(shown) == response.text == "go on"
    assert response.compaction == {"type": "compaction", "content": "the summary",
                                   "encrypted_content": "opaque-test-state"}
    assert response.as_message().meta["compaction"]["content"] == "the summary"


def test_a_bad_request_that_fails_without_the_edits_too_keeps_them():
    from hermes_core.llm import LLMError
    from hermes_core.plugins.llm.anthropic import AnthropicClient
    from hermes_core.testing import Failure

    refused: list[str] = []
    with MessagesAPIServer([Failure(400, "messages: too long"), Failure(400, "messages: too long"),
                            "fine"]) as api:
        client = AnthropicClient(api_key="test", base_url=api.base_url, model="claude-test",
                                 max_retries=0)
        client.platform_context([{"type": "compact_20260112"}], refused.append)
        with pytest.raises(LLMError, match="too long"):
            client.respond(system="s", messages=[Message("user", "hi")], max_tokens=50)
        client.respond(system="s", messages=[Message("user", "hi")], max_tokens=50)
        client.close()
        bodies = api.bodies
    # the second try (without the edits) failed too: the edits were not the problem, kept
    assert ["context_management" in b for b in bodies] == [True, False, True]
    assert refused == []


def test_every_engine_sharing_the_client_hears_of_a_refusal():
    from hermes_core.plugins.llm.anthropic import AnthropicClient

    class Engine:  # what a compressor (parent's or delegated child's) registers
        def __init__(self) -> None:
            self.heard: list[str] = []

        def refused(self, why: str) -> None:
            self.heard.append(why)

    parent, child, gone = Engine(), Engine(), Engine()
    edit = [{"type": "clear_tool_uses_20250919"}]
    with MessagesAPIServer(["fine"], refuse_context_management=True) as api:
        client = AnthropicClient(api_key="test", base_url=api.base_url, model="claude-test",
                                 max_retries=0)
        assert client.platform_context(edit, parent.refused) is None
        assert client.platform_context(edit, child.refused) is None
        assert client.platform_context(edit, gone.refused) is None
        del gone  # a finished child's engine: held weakly, not kept alive
        client.respond(system="s", messages=[Message("user", "hi")], max_tokens=50)
        late = client.platform_context(edit, Engine().refused)
        client.close()
    assert len(parent.heard) == len(child.heard) == 1 and "refused" in parent.heard[0]
    assert late is not None and "refused them earlier" in late  # a later engine starts local


def test_a_compaction_trigger_beyond_the_window_is_refused_at_start(hermes_home):
    settings = ("  platform:\n    features: [compact_20260112]\n"
                "    compaction_trigger_tokens: 150000\n")
    with MessagesAPIServer([]) as api, pytest.raises(HermesCoreError,
                                                     match="compaction_trigger_tokens"):
        Agent.create(host(hermes_home, api, settings, extra="  context_window: 100000\n"))


def test_clear_thinking_is_not_sent_without_thinking():
    from hermes_core.plugins.context_engine.compressor.platform import (
        PlatformSettings,
        build_edits,
    )

    settings = PlatformSettings(features=["clear_thinking_20251015", "clear_tool_uses_20250919"])
    edits, notes = build_edits(settings)
    assert [e["type"] for e in edits] == ["clear_tool_uses_20250919"]
    assert "no extended thinking" in notes[0]
    edits, _ = build_edits(settings, thinking=True)
    assert edits[0] == {"type": "clear_thinking_20251015",
                        "keep": {"type": "thinking_turns", "value": 1}}
