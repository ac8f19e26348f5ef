"""What a Hermes Agent 0.19.0 plugin reaches of its host through ``ctx``: ``ctx.llm`` (completions
on the user's model) and ``ctx.dispatch_tool`` (a tool run through the host's tool runner), and
the module-level helpers of ``agent.context_engine`` a newer engine imports.

The plugins are written here in Hermes' form and driven by a real Agent: ``ctx.llm`` against the
loopback Messages API server with the real anthropic SDK, ``ctx.dispatch_tool`` inside a scripted
turn whose tools are real (the file memory's ``memory`` tool).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
import pytest
from conftest import drop_folder_plugin, run
from hermes_core_hermes_compat import shims
from test_bridge_general import LOG_SOURCE as LOG

from hermes_core.agent import Agent
from hermes_core.testing import MessagesAPIServer, Reply, make_host

#: a plugin whose tool asks the user's model through ctx.llm, as 0.19.0's plugin_llm documents
LLM_USER = LOG + '''
import asyncio, time
from agent.plugin_llm import PluginLlmTextInput, PluginLlmTrustError

CTX = {}
MOOD = {"type": "object", "properties": {"mood": {"type": "string"}}, "required": ["mood"]}


def digest(args, **kw):
    llm = CTX["ctx"].llm
    out = {}
    r = llm.complete([{"role": "system", "content": "DIGEST-SYSTEM: one line"},
                      {"role": "user", "content": args["text"]}], max_tokens=64,
                     purpose="digest")
    out["complete"] = [r.text, r.provider, r.model, r.agent_id, r.usage.input_tokens,
                       r.usage.output_tokens, r.audit["plugin_id"], r.audit["purpose"]]
    s = llm.complete_structured(instructions="Rate the mood",
                                input=[PluginLlmTextInput(text=args["text"])],
                                json_schema=MOOD, schema_name="mood")
    out["structured"] = [s.parsed, s.content_type]
    out["async"] = asyncio.run(llm.acomplete([{"role": "system", "content": "DIGEST-SYSTEM"},
                                              {"role": "user", "content": "again"}])).text
    try:
        llm.complete([{"role": "user", "content": "x"}], model="gpt-4o")
        out["override"] = "allowed"
    except PluginLlmTrustError as exc:
        out["override"] = [type(exc).__name__, isinstance(exc, PermissionError)]
    started = time.monotonic()
    try:
        llm.complete([{"role": "system", "content": "HANG-SYSTEM"},
                      {"role": "user", "content": "x"}], timeout=0.5)
        out["hung"] = "answered"
    except Exception as exc:
        out["hung"] = [type(exc).__name__, time.monotonic() - started]
    _log("digest", **out)
    return r.text


def register(ctx):
    CTX["ctx"] = ctx
    ctx.register_tool("digest", "digest", {
        "name": "digest", "description": "digest a text",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}, digest)
'''


def _answer(body: dict[str, Any]) -> Reply:
    """The model: a slow answer for the hung call, the digest, the mood as fenced JSON, the
    turn's tool call, and its end."""
    blob = json.dumps(body)
    if "HANG-SYSTEM" in blob:
        return Reply(text="too late", delay=4.0)
    if "DIGEST-SYSTEM" in blob:
        return Reply(text="Sea walk, calm.", usage={"input_tokens": 12, "output_tokens": 4})
    if "Schema name: mood" in blob:
        return Reply(text='```json\n{"mood": "calm"}\n```')
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(part.get("type") == "tool_result" for part in last):
        return Reply(text="Done.")
    return Reply(tool_calls=[{"name": "digest", "input": {"text": "We walked by the sea."}}])


def _calls(core_home: Path, plugin: str) -> list[dict[str, Any]]:
    """The plugin's log: in its own Hermes home (the bridge's stand-in), or, with hermes-agent
    installed (whose get_hermes_home reads HERMES_HOME), in the bridge's common folder."""
    path = core_home / "hermes-compat" / plugin / "calls.jsonl"
    if not path.exists() and shims.hermes_agent_installed():
        path = core_home / "hermes-compat" / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_ctx_llm_runs_on_the_hosts_model(core_home: Path) -> None:
    """ctx.llm.complete / complete_structured / acomplete reach hermes-core's model client (the
    real anthropic SDK against the loopback server) and answer in 0.19.0's result shapes; a
    model override is refused as by a Hermes without a trust block; a hung model raises within
    the plugin's timeout instead of holding the plugin."""
    drop_folder_plugin(core_home, "llmuser", LLM_USER)
    with MessagesAPIServer(_answer) as api:
        host = make_host(core_home, plugins=[("hermes_compat", bridge)], config=(
            "memory:\n  providers: [hermes-llmuser]\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n"))
        agent = Agent.create(host)
        try:
            result = agent.run_turn("Digest my day.")
        finally:
            agent.close()
        bodies = api.bodies
    assert result.reply == "Done."
    [logged] = [c for c in _calls(core_home, "llmuser") if c["event"] == "digest"]
    assert logged["complete"] == ["Sea walk, calm.", "anthropic", "claude-test", "default", 12, 4,
                                  "llmuser", "digest"]
    assert logged["structured"] == [{"mood": "calm"}, "json"]
    assert logged["async"] == "Sea walk, calm."
    assert logged["override"] == ["PluginLlmTrustError", True]
    name, seconds = logged["hung"]
    assert name in ("APITimeoutError", "RuntimeError") and seconds < 3.0
    digest = next(b for b in bodies if "DIGEST-SYSTEM: one line" in json.dumps(b))
    assert digest["max_tokens"] == 64
    assert "We walked by the sea." in json.dumps(digest["messages"])
    structured = next(b for b in bodies if "Schema name: mood" in json.dumps(b))
    assert "Respond with a single JSON object" in json.dumps(structured["system"])
    assert not any("gpt-4o" in json.dumps(b) for b in bodies)  # the refused call was never sent


NO_MODEL = '''
def register(ctx):
    ctx.register_hook("pre_llm_call", lambda **kw: None)
'''


def test_ctx_llm_without_a_model_raises_as_hermes(core_home: Path) -> None:
    """A context with no model client (a plugin loaded outside a host): Hermes' RuntimeError
    'No LLM provider configured'; an image input is refused as text-only; bad inputs raise
    ValueError as in 0.19.0."""
    from hermes_core_hermes_compat import discovery
    from hermes_core_hermes_compat.host_access import HostAccess
    from hermes_core_hermes_compat.loading import _Collector, load

    from hermes_core.kinds import PluginContext

    drop_folder_plugin(core_home, "nomodel", NO_MODEL)
    [candidate] = [c for c in discovery.discover(core_home) if c.plugin == "nomodel"]
    context = PluginContext(plugin_name="hermes_compat", home=core_home,
                            config=make_host(core_home).config.core,
                            logger=__import__("logging").getLogger("t"))
    loaded = load(candidate, core_home / "h", HostAccess(context))
    ctx = _Collector(loaded, "nomodel")
    with pytest.raises(RuntimeError, match="No LLM provider configured"):
        ctx.llm.complete([{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError, match="non-empty instructions"):
        ctx.llm.complete_structured(instructions=" ", input=[{"type": "text", "text": "x"}])
    with pytest.raises(ValueError, match="Unknown input block type"):
        ctx.llm.complete_structured(instructions="x", input=[{"type": "audio"}])
    with pytest.raises(ValueError, match="sends text only"):
        ctx.llm.complete_structured(instructions="x", input=[{"type": "image", "url": "u"}])


#: a plugin whose tool dispatches other tools through ctx.dispatch_tool (0.19.0's registry call)
STASH = LOG + '''
CTX = {}


def stash(args, **kw):
    ctx = CTX["ctx"]
    saved = ctx.dispatch_tool("memory", {"action": "add", "target": "memory",
                                         "content": args["fact"]})
    missing = ctx.dispatch_tool("no_such_tool", {})
    own = ctx.dispatch_tool("peek", {"key": "k1"})
    broken = ctx.dispatch_tool("broken", {})
    _log("stash", saved=saved, missing=missing, own=own, broken=broken)
    return "stashed"


def peek(args, **kw):
    return json.dumps({"peeked": args.get("key")})


def broken(args, **kw):
    raise ValueError("the vault is locked")


def pre_tool_call(tool_name, args, **kw):
    _log("pre_tool_call", tool_name=tool_name)


def pre_llm_call(**kw):
    _log("hook", answer=CTX["ctx"].dispatch_tool("memory", {"action": "search", "query": "x"}))


def _schema(name):
    return {"name": name, "description": name,
            "parameters": {"type": "object", "properties": {"fact": {"type": "string"},
                                                            "key": {"type": "string"}}}}


def register(ctx):
    CTX["ctx"] = ctx
    for name, fn in (("stash", stash), ("peek", peek), ("broken", broken)):
        ctx.register_tool(name, "stash", _schema(name), fn)
    ctx.register_hook("pre_tool_call", pre_tool_call)
    ctx.register_hook("pre_llm_call", pre_llm_call)
'''


def test_ctx_dispatch_tool_runs_the_conversations_tools(core_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a tool call, ctx.dispatch_tool runs hermes-core's own tools (the memory write
    lands), the plugin's other tools (on its own thread, no deadlock) and answers 0.19.0's JSON
    errors for an unknown tool and a failing one; the guard hooks see the dispatched calls. In a
    hook, with no tool call running, it answers an error JSON."""
    drop_folder_plugin(core_home, "stash", STASH)
    turns = [{"user": "Keep this.",
              "tool_calls": [{"name": "stash", "arguments": {"fact": "Ines keeps bees"}}],
              "assistant": "Kept."}]
    report = run(core_home, turns, providers=["file_memory", "hermes-stash"],
                 monkeypatch=monkeypatch)
    assert report.turns[0]["reply"] == "Kept."
    assert [c["ok"] for c in report.turns[0]["tool_calls"]] == [True]
    assert "Ines keeps bees" in (core_home / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    calls = _calls(core_home, "stash")
    [logged] = [c for c in calls if c["event"] == "stash"]
    assert "error" not in json.loads(logged["saved"]) if logged["saved"].startswith("{") else True
    assert json.loads(logged["missing"]) == {"error": "Unknown tool: no_such_tool"}
    assert json.loads(logged["own"]) == {"peeked": "k1"}
    assert "the vault is locked" in json.loads(logged["broken"])["error"]
    assert [c["tool_name"] for c in calls if c["event"] == "pre_tool_call"] == [
        "stash", "memory", "peek", "broken"]
    [hook] = [c for c in calls if c["event"] == "hook"]
    assert "cannot be dispatched here" in json.loads(hook["answer"])["error"]


#: an engine of a newer Hermes importing agent.context_engine's module-level helpers
HELPERS_ENGINE = LOG + '''
from agent.context_engine import (MEMORY_CONTEXT_MAX_CHARS, ContextEngine,
                                  automatic_compaction_status_message, sanitize_memory_context)


class Quiet(ContextEngine):
    name = "quiet"
    emit_automatic_compaction_status = False

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False,
                 memory_context=""):
        return messages


class Loud(Quiet):
    emit_automatic_compaction_status = True

    def get_automatic_compaction_status_message(self, *, phase, default_message, **context):
        return f"  {phase}: {default_message}  "


def register(ctx):
    long = "A" * 5000 + "MIDDLE" + "Z" * 3000
    _log("helpers", limit=MEMORY_CONTEXT_MAX_CHARS,
         clean=sanitize_memory_context("  Ada's key is sk-ant-api03-abcdefghijklmnopqrstuvwx, "
                                       "db postgres://ada:hunter2@db.local/x, "
                                       "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123  "),
         long=sanitize_memory_context(long),
         quiet=automatic_compaction_status_message(Quiet(), phase="compress",
                                                   default_message="compacted"),
         loud=automatic_compaction_status_message(Loud(), phase="preflight",
                                                  default_message="compacted"))
    ctx.register_context_engine(Quiet())
'''


@pytest.mark.skipif(shims.hermes_agent_installed(),
                    reason="hermes-agent's own agent.context_engine is used: 0.19.0's has none "
                           "of newer Hermes' helpers")
def test_an_engine_importing_newer_context_engine_helpers(core_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine importing MEMORY_CONTEXT_MAX_CHARS, sanitize_memory_context and
    automatic_compaction_status_message loads and runs: secrets are masked, an over-long text
    keeps its head and tail around a cut marker, the status follows the engine's wishes."""
    drop_folder_plugin(core_home, "helpers", HELPERS_ENGINE)
    report = run(core_home, [{"user": "Hello.", "assistant": "Hi."}], providers=[],
                 engine="hermes-helpers", monkeypatch=monkeypatch)
    assert report.turns[0]["reply"] == "Hi."
    [logged] = [c for c in _calls(core_home, "helpers") if c["event"] == "helpers"]
    assert logged["limit"] == 6000
    clean = logged["clean"]
    assert clean.startswith("Ada's key is ") and clean.endswith("=***")
    for secret in ("abcdefghijklmnopqrstuvwx", "hunter2", "ghp_abc"):
        assert secret not in clean
    assert "postgres://ada:***@db.local/x" in clean
    long = logged["long"]
    assert len(long) < 6000 and "MIDDLE" not in long
    assert long.startswith("A" * 4000 + "\n...[memory provider context truncated]...\n")
    assert long.endswith("Z" * 1500)
    assert logged["quiet"] is None
    assert logged["loud"] == "preflight: compacted"


#: a plugin of a newer Hermes keeping a counter in ctx.state and probing ctx.call_mcp
STATEFUL = LOG + '''
CTX = {}


def pre_llm_call(user_message, **kw):
    state = CTX["ctx"].state
    seen = state.get("turns", 0) + 1
    state.set("turns", seen)
    state.set("last", {"text": user_message})
    out = {"seen": seen, "path": str(state.path), "default": state.get("absent", "none")}
    for bad_key in ("../escape", "", "a..b"):
        try:
            state.get(bad_key)
            out.setdefault("keys", []).append("accepted")
        except ValueError:
            out.setdefault("keys", []).append("refused")
    try:
        state.set("handle", object())
        out["value"] = "accepted"
    except ValueError:
        out["value"] = "refused"
    try:
        CTX["ctx"].call_mcp("github", "list_issues", {"repo": "x"})
        out["mcp"] = "allowed"
    except PermissionError as exc:
        out["mcp"] = str(exc)
    _log("state", **out)


def register(ctx):
    CTX["ctx"] = ctx
    ctx.register_hook("pre_llm_call", pre_llm_call)
'''


def test_ctx_state_and_call_mcp_of_newer_hermes(core_home: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ctx.state keeps JSON values across turns in the plugin's own folder (bad keys and values
    refused as newer Hermes refuses them); ctx.call_mcp is refused with PermissionError, as newer
    Hermes refuses a server not on the plugin's allow-list."""
    drop_folder_plugin(core_home, "stateful", STATEFUL)
    report = run(core_home, [{"user": "One.", "assistant": "1"}, {"user": "Two.", "assistant": "2"}],
                 providers=["hermes-stateful"], monkeypatch=monkeypatch)
    assert [t["reply"] for t in report.turns] == ["1", "2"]
    logged = [c for c in _calls(core_home, "stateful") if c["event"] == "state"]
    assert [c["seen"] for c in logged] == [1, 2]
    assert logged[0]["default"] == "none"
    assert logged[0]["keys"] == ["refused", "refused", "refused"]
    assert logged[0]["value"] == "refused"
    assert "not allowed to call MCP server 'github'" in logged[0]["mcp"]
    path = Path(logged[1]["path"])
    assert path.name == "state.json" and path.parent.parent.name == "plugin-data"
    assert (core_home / "hermes-compat") in path.parents
    assert json.loads(path.read_text(encoding="utf-8")) == {"turns": 2,
                                                            "last": {"text": "Two."}}


#: a slash command summarising its argument with the user's model (0.19.0's plugin_llm use case)
TLDR = '''
def _tldr(raw_args):
    answer = CTX["ctx"].llm.complete([{"role": "system", "content": "TLDR-SYSTEM"},
                                      {"role": "user", "content": raw_args}], max_tokens=32)
    return f"{answer.text} ({answer.provider}, {answer.model})"


CTX = {}


def register(ctx):
    CTX["ctx"] = ctx
    ctx.register_command("tldr", handler=_tldr, description="summarise a paste")
'''


def test_ctx_llm_in_a_slash_command_asks_the_configured_model(core_home: Path) -> None:
    """``hermes-core hermes slash tldr ...`` (its own process): the plugin's ctx.llm asks the
    model config.yaml selects (the real anthropic SDK against the loopback server); with no key
    configured it raises Hermes' RuntimeError and the command fails naming it."""
    import subprocess
    import sys

    drop_folder_plugin(core_home, "tldr", TLDR)

    def slash(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hermes_core", "hermes", "slash", *args],
                              capture_output=True, text=True, timeout=120)

    with MessagesAPIServer([Reply(text="Bees, briefly.")]) as api:
        (core_home / "config.yaml").write_text(
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n", encoding="utf-8")
        done = slash("tldr", "A long paste about bees.")
        bodies = api.bodies
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Bees, briefly. (anthropic, claude-test)"
    assert len(bodies) == 1 and "TLDR-SYSTEM" in json.dumps(bodies[0]["system"])
    assert "A long paste about bees." in json.dumps(bodies[0]["messages"])
    (core_home / "config.yaml").write_text("llm:\n  model: claude-test\n", encoding="utf-8")
    failed = slash("tldr", "x")
    assert failed.returncode != 0
    assert "No LLM provider configured" in failed.stderr
