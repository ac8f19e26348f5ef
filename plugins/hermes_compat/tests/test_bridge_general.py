"""Hermes *general* plugins (hooks, tools, commands registered by ``register(ctx)``) in hermes-core.

The plugins are written here in Hermes 0.19.0's form and dropped into the home's
``hermes-plugins/`` folder; each hook logs the keyword arguments it got into its Hermes home, so
the tests check both that the hook ran at its point of the turn and what it was given. The model's
words are scripted (the replay, or the loopback Messages API server with the real anthropic SDK):
the only fake part.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
import pytest
from conftest import drop_folder_plugin, recall_in_prompt, run

from hermes_core.agent import Agent
from hermes_core.fence import FENCE_OPEN
from hermes_core.testing import MessagesAPIServer, Reply, make_host

#: the plugins' own log: each hook's arguments, into its Hermes home
LOG_SOURCE = '''
import json
from hermes_constants import get_hermes_home


def _log(event, **fields):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, **fields}, default=str) + "\\n")
'''

#: a general plugin using every hook the bridge delivers, three tools and a slash command
POLICY = LOG_SOURCE + '''

def on_session_start(session_id, model=None, platform=None, **kw):
    _log("on_session_start", session_id=session_id, platform=platform)


def pre_llm_call(session_id, user_message, conversation_history, is_first_turn, model, platform,
                 sender_id, **kw):
    _log("pre_llm_call", session_id=session_id, user_message=user_message,
         roles=[m["role"] for m in conversation_history], is_first_turn=is_first_turn,
         platform=platform, turn_id=kw.get("turn_id"))
    return {"context": f"POLICY-NOTE: answer in {len(user_message)} words or fewer"}


def post_llm_call(session_id, user_message, assistant_response, conversation_history, **kw):
    _log("post_llm_call", user_message=user_message, assistant_response=assistant_response,
         messages=len(conversation_history))


def on_session_end(session_id, completed, interrupted, **kw):
    _log("on_session_end", session_id=session_id, completed=completed, interrupted=interrupted)


def on_session_finalize(session_id, platform, reason, **kw):
    _log("on_session_finalize", session_id=session_id, reason=reason)


def on_session_reset(session_id, platform, reason, **kw):
    _log("on_session_reset", session_id=session_id, reason=reason)


def pre_tool_call(tool_name, args, session_id, tool_call_id, **kw):
    _log("pre_tool_call", tool_name=tool_name, args=args, tool_call_id=tool_call_id)
    if tool_name == "vault_delete":
        return {"action": "block", "message": "deleting from the vault is not allowed"}


def post_tool_call(tool_name, result, status, duration_ms, **kw):
    _log("post_tool_call", tool_name=tool_name, status=status, result=result)


def transform_tool_result(tool_name, result, **kw):
    if tool_name == "vault_read":
        return result.replace("secret", "[redacted]")


def failing_hook(**kw):
    raise RuntimeError("this callback always fails")


def vault_read(args, **kw):
    return json.dumps({"key": args.get("key"), "text": "the secret is 42"})


def vault_delete(args, **kw):
    _log("vault_delete ran")
    return json.dumps({"deleted": args.get("key")})


def _schema(name):
    return {"name": name, "description": f"{name} of the vault",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}


def register(ctx):
    for hook in ("on_session_start", "pre_llm_call", "post_llm_call", "on_session_end",
                 "on_session_finalize", "on_session_reset", "pre_tool_call", "post_tool_call",
                 "transform_tool_result"):
        ctx.register_hook(hook, globals()[hook])
    ctx.register_hook("post_llm_call", failing_hook)   # fails: the others still run
    ctx.register_hook("pre_gateway_dispatch", failing_hook)   # no hermes-core counterpart
    ctx.register_tool(name="vault_read", toolset="vault", schema=_schema("vault_read"),
                      handler=vault_read)
    ctx.register_tool("vault_delete", "vault", _schema("vault_delete"), vault_delete)
    ctx.register_tool("vault_hidden", "vault", _schema("vault_hidden"), vault_read,
                      check_fn=lambda: False)
    ctx.register_command("vault", lambda raw_args: "ok", description="the vault")
'''

#: a general plugin whose hooks hang or raise, and a tool that hangs
STUCK = '''
import json, threading

_never = threading.Event()


def pre_llm_call(**kw):
    _never.wait()


def pre_tool_call(tool_name, **kw):
    if tool_name == "stuck_tool":
        _never.wait()


def post_llm_call(**kw):
    raise ValueError("post_llm_call is broken")


def quick(args, **kw):
    return json.dumps({"ok": True})


def register(ctx):
    ctx.register_hook("pre_llm_call", pre_llm_call)
    ctx.register_hook("pre_tool_call", pre_tool_call)
    ctx.register_hook("post_llm_call", post_llm_call)
    schema = {"name": "stuck_tool", "description": "hangs in its pre_tool_call hook",
              "parameters": {"type": "object", "properties": {}}}
    ctx.register_tool("stuck_tool", "stuck", schema, quick)
'''


def calls_of(core_home: Path, plugin: str) -> list[dict[str, Any]]:
    path = core_home / "hermes-compat" / plugin / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def events(calls: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [c for c in calls if c["event"] == name]


TURNS = [
    {"user": "Hello, I keep my notes in the vault.", "assistant": "Understood."},
    {"user": "Read the vault key a, then delete it.",
     "tool_calls": [{"name": "vault_read", "arguments": {"key": "a"}},
                    {"name": "vault_delete", "arguments": {"key": "a"}}],
     "assistant": "Read it; deleting was refused."},
    {"user": "Start over.", "assistant": "Fresh start.", "new_session": True},
]


def test_general_plugin_hooks_and_tools_in_a_replay(core_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    drop_folder_plugin(core_home, "policy", POLICY)
    report = run(core_home, TURNS, providers=["file_memory", "hermes-policy"],
                 monkeypatch=monkeypatch)
    assert "hermes-policy" in report.providers
    assert {"vault_read", "vault_delete"} <= set(report.tools)
    assert "vault_hidden" not in report.tools  # its check_fn() is false
    calls = calls_of(core_home, "policy")
    sessions = [t["session_id"] for t in report.turns]
    first, second = sessions[0], sessions[2]
    assert first != second

    # on_session_start: once per brand-new session, at its start
    assert [c["session_id"] for c in events(calls, "on_session_start")] == [first, second]
    # pre_llm_call: once per turn, with the history up to and including the user's message
    pre = events(calls, "pre_llm_call")
    assert [c["user_message"] for c in pre] == [t["user"] for t in TURNS]
    assert pre[0]["is_first_turn"] is True and pre[0]["roles"] == ["user"]
    assert pre[1]["is_first_turn"] is False and pre[1]["roles"] == ["user", "assistant", "user"]
    assert pre[2]["is_first_turn"] is True and pre[2]["session_id"] == second
    assert pre[0]["platform"] and pre[0]["turn_id"] != pre[1]["turn_id"]
    # its context reaches the model, fenced and labelled, on the user message only
    injected = recall_in_prompt("hermes-policy")
    assert injected and all("POLICY-NOTE: answer in" in block for block in injected)
    # post_llm_call and the per-turn on_session_end after each turn; the failing callback
    # registered for post_llm_call spoils nothing
    post = events(calls, "post_llm_call")
    assert [c["assistant_response"] for c in post] == [t["assistant"] for t in TURNS]
    assert post[1]["messages"] >= 5  # user, tool-calling assistant, 2 tool results, assistant
    ended = events(calls, "on_session_end")
    assert len(ended) == 3 and all(c["completed"] and not c["interrupted"] for c in ended)
    # /new: the old session is finalised, the new one reset; the end of the replay finalises
    finalized = events(calls, "on_session_finalize")
    assert [(c["session_id"], c["reason"]) for c in finalized] == [
        (first, "session_boundary"), (second, "shutdown")]
    assert [(c["session_id"], c["reason"]) for c in events(calls, "on_session_reset")] == [
        (second, "new_session")]

    # tools: pre_tool_call sees each call; a block answers the call and the tool never runs
    assert [c["tool_name"] for c in events(calls, "pre_tool_call")] == ["vault_read",
                                                                        "vault_delete"]
    assert events(calls, "pre_tool_call")[0]["args"] == {"key": "a"}
    assert not events(calls, "vault_delete ran")
    results = {c["name"]: c for c in report.turns[1]["tool_calls"]}
    assert json.loads(results["vault_read"]["result"]) == {"key": "a",
                                                           "text": "the [redacted] is 42"}
    assert results["vault_delete"]["result"] == (
        "Error: the plugin 'hermes-policy' blocked this call of 'vault_delete': deleting from "
        "the vault is not allowed")
    assert [(c["tool_name"], c["status"]) for c in events(calls, "post_tool_call")] == [
        ("vault_read", "ok"), ("vault_delete", "blocked")]

    # the bridge names the first call of each registered hook and tool in its log (what
    # bench/hermes_plugin_coverage.py reads to tell what ran): every one that ran above
    mark = "Hermes plugin 'policy': its "
    named = {r.getMessage()[len(mark):].removesuffix(" was called") for r in caplog.records
             if r.getMessage().startswith(mark) and r.getMessage().endswith(" was called")}
    assert {"hook on_session_start", "hook pre_llm_call", "hook post_llm_call",
            "hook on_session_end", "hook on_session_finalize", "hook on_session_reset",
            "hook pre_tool_call", "hook post_tool_call", "tool vault_read"} <= named, named


def test_general_plugin_listed_with_what_runs_and_what_does_not(core_home: Path) -> None:
    drop_folder_plugin(core_home, "policy", POLICY)
    out = subprocess.run([sys.executable, "-m", "hermes_core", "hermes", "plugins", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = {p["name"]: p for p in json.loads(out.stdout)["plugins"]}["hermes-policy"]
    assert found["kind"] == "general" and found["status"] == "ready"
    assert "memory.providers" in found["detail"]
    assert found["tools"] == ["vault_read", "vault_delete", "vault_hidden"]
    assert set(found["hooks"]) == {"on_session_start", "pre_llm_call", "post_llm_call",
                                   "on_session_end", "on_session_finalize", "on_session_reset",
                                   "pre_tool_call", "post_tool_call", "transform_tool_result"}
    unmapped = "\n".join(found["unmapped"])
    assert "pre_gateway_dispatch (hermes-core's platforms dispatch" in unmapped
    assert "transform_tool_result (partly: only the results of Hermes plugins' tools" in unmapped
    assert not [u for u in found["unmapped"] if u.startswith(("pre_tool_call", "post_tool_call"))]
    assert "/vault" not in unmapped
    assert found["commands"] == ["hermes-core hermes slash vault"]
    text = subprocess.run([sys.executable, "-m", "hermes_core", "hermes", "plugins"],
                          capture_output=True, text=True, timeout=120).stdout
    assert "not delivered: pre_gateway_dispatch" in text


def test_failures_are_named_and_the_turn_goes_on(core_home: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A pre_llm_call that hangs costs the turn one prefetch deadline; a pre_tool_call that
    hangs blocks its call after most of the on_pre_tool_call deadline (Hermes waits for a guard,
    so the call never runs unguarded); a post_llm_call that raises is logged. The other plugin
    and the turn go on."""
    drop_folder_plugin(core_home, "stuck", STUCK)
    drop_folder_plugin(core_home, "policy", POLICY)
    turns = [{"user": "Use the stuck tool.", "tool_calls": [{"name": "stuck_tool",
                                                              "arguments": {}}],
              "assistant": "It did not answer."},
             {"user": "And now?", "assistant": "Still here."}]
    report = run(core_home, turns, providers=["file_memory", "hermes-stuck", "hermes-policy"],
                 config="memory:\n  prefetch_timeout: 0.3\nhooks:\n  tool_timeout: 5\n"
                        "  timeouts:\n    on_pre_tool_call: 0.5\n",
                 monkeypatch=monkeypatch)
    assert [t["reply"] for t in report.turns] == ["It did not answer.", "Still here."]
    call = report.turns[0]["tool_calls"][0]
    assert not call["ok"] and "pre_tool_call check of Hermes plugin 'stuck' did not answer in " \
        "time" in call["result"]
    # the other plugin's pre_llm_call still reached the model on both turns
    assert len(recall_in_prompt("hermes-policy")) >= 2
    problems = [p for t in report.turns for p in t["hook_problems"]]
    assert any(p["plugin"].endswith("hermes-stuck") and p["hook"] == "prefetch"
               for p in problems)
    assert not any("hermes-policy" in p["plugin"] for p in problems)


def test_injected_context_reaches_the_messages_api(core_home: Path) -> None:
    """With the real anthropic SDK against the loopback Messages API server: pre_llm_call's
    context is on the user message of the request, the system prompt is untouched."""
    drop_folder_plugin(core_home, "policy", POLICY)
    with MessagesAPIServer([Reply(text="Short answer.")]) as api:
        host = make_host(core_home, plugins=[("hermes_compat", bridge)], config=(
            "memory:\n  providers: [file_memory, hermes-policy]\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n"))
        agent = Agent.create(host)  # the client llm.* selects (the kernel builds it)
        try:
            result = agent.run_turn("How long should answers be?")
        finally:
            agent.close()
        bodies = api.bodies
    assert result.reply == "Short answer."
    text = bodies[0]["messages"][0]["content"][0]["text"]
    assert text.startswith("How long should answers be?\n\n" + FENCE_OPEN)
    assert "POLICY-NOTE: answer in 27 words or fewer" in text
    assert "POLICY-NOTE" not in json.dumps(bodies[0]["system"])
    assert [t["name"] for t in bodies[0]["tools"] if t["name"].startswith("vault")] == [
        "vault_read", "vault_delete"]


#: a Hermes guard plugin: it refuses writes to the user profile through any tool, and records
#: every call it sees (hermesguardian and openwolf-hermes work this way)
GUARD = LOG_SOURCE + '''

def pre_tool_call(tool_name, args, session_id, tool_call_id, **kw):
    _log("pre_tool_call", tool_name=tool_name, args=args, session_id=session_id)
    if args.get("target") == "user":
        return {"action": "block", "message": "the user profile is read-only"}
    if tool_name == "memory" and args.get("action") == "search":
        raise RuntimeError("this guard is broken for searches")


def post_tool_call(tool_name, result, status, error_type, **kw):
    _log("post_tool_call", tool_name=tool_name, status=status, error_type=error_type,
         result=result)


def register(ctx):
    ctx.register_hook("pre_tool_call", pre_tool_call)
    ctx.register_hook("post_tool_call", post_tool_call)
'''


def test_hermes_tool_hooks_guard_hermes_cores_own_tools(core_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermes' pre_tool_call/post_tool_call see the file memory's own ``memory`` tool (not a
    Hermes plugin's): a block keeps the write out of USER.md, a guard that raises lets the call
    run."""
    drop_folder_plugin(core_home, "guard", GUARD)
    turns = [{"user": "Remember things, please.",
              "tool_calls": [
                  {"name": "memory", "arguments": {"action": "add", "target": "memory",
                                                   "content": "Priya runs the data team"}},
                  {"name": "memory", "arguments": {"action": "add", "target": "user",
                                                   "content": "Priya lives in Rotterdam"}},
                  {"name": "memory", "arguments": {"action": "search", "query": "Priya"}}],
              "assistant": "Noted."}]
    report = run(core_home, turns, providers=["file_memory", "hermes-guard"],
                 monkeypatch=monkeypatch)
    assert report.turns[0]["reply"] == "Noted."
    results = report.turns[0]["tool_calls"]
    assert [c["ok"] for c in results] == [True, False, True]
    assert results[1]["result"] == ("Error: the plugin 'hermes-guard' blocked this call of "
                                    "'memory': the user profile is read-only")
    assert "Priya runs the data team" in results[2]["result"]  # the broken guard blocked nothing
    memories = core_home / "memories"
    assert "Priya runs the data team" in (memories / "MEMORY.md").read_text(encoding="utf-8")
    user = memories / "USER.md"
    assert not user.exists() or "Rotterdam" not in user.read_text(encoding="utf-8")
    calls = calls_of(core_home, "guard")
    session = report.turns[0]["session_id"]
    assert [(c["tool_name"], c["args"].get("target"), c["session_id"])
            for c in events(calls, "pre_tool_call")] == [
        ("memory", "memory", session), ("memory", "user", session), ("memory", None, session)]
    assert [(c["status"], c["error_type"]) for c in events(calls, "post_tool_call")] == [
        ("ok", None), ("blocked", "plugin_block"), ("ok", None)]


#: a plugin whose on_session_start is slow (forge-hermes-plugin starts its local service there)
SLOW_START = '''
import json, time
from hermes_constants import get_hermes_home


def _log(event):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, "at": time.monotonic()}) + "\\n")


def on_session_start(**kw):
    time.sleep(1.5)   # the plugin's own slow start (longer than the 0.5 s deadline below)
    _log("on_session_start done")


def post_llm_call(**kw):
    _log("post_llm_call")


def register(ctx):
    ctx.register_hook("on_session_start", on_session_start)
    ctx.register_hook("post_llm_call", post_llm_call)
'''


def test_a_slow_session_start_hook_goes_on_without_a_missed_deadline(
        core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hermes on_session_start slower than the on_session_switch deadline is waited for only
    part of it: it finishes on the plugin's thread, the plugin's later hooks run after it, in
    order, and no hook problem is reported."""
    drop_folder_plugin(core_home, "slow", SLOW_START)
    report = run(core_home, [{"user": "Hello.", "assistant": "Hi."}],
                 providers=["file_memory", "hermes-slow"],
                 config="hooks:\n  timeouts:\n    on_session_switch: 0.5\n    sync_turn: 10\n",
                 monkeypatch=monkeypatch)
    assert report.turns[0]["reply"] == "Hi."
    assert not [p for t in report.turns for p in t["hook_problems"] if "hermes-slow" in p["plugin"]]
    assert report.summary["hooks_timed_out"] == 0 and report.summary["hook_problems"] == 0
    assert [c["event"] for c in calls_of(core_home, "slow")] == ["on_session_start done",
                                                                 "post_llm_call"]


def test_a_provider_tool_registered_again_is_offered_once(core_home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """As mnemosyne-hermes does: register(ctx) registers its provider and then each of the
    provider's tools again with ctx.register_tool. Hermes' provider loading ignores the second
    registration; the bridge offers the provider's tool once (no clash with itself)."""
    import hermes_style

    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER + '''

_register_provider = register


def register(ctx):
    _register_provider(ctx)
    ctx.register_tool("recorder_notes", "recorder",
                      {"name": "recorder_notes", "description": "the notes, again",
                       "parameters": {"type": "object", "properties": {}}},
                      lambda args, **kw: "the copy")
''')
    turns = [{"user": "Show the notes.", "tool_calls": [{"name": "recorder_notes",
                                                         "arguments": {}}],
              "assistant": "Shown."}]
    report = run(core_home, turns, providers=["file_memory", "hermes-recorder"],
                 monkeypatch=monkeypatch)
    assert report.tools.count("recorder_notes") == 1
    call = report.turns[0]["tool_calls"][0]
    assert call["ok"] and "notes" in json.loads(call["result"])  # the provider's handler
    out = subprocess.run([sys.executable, "-m", "hermes_core", "hermes", "plugins", "--json"],
                         capture_output=True, text=True, timeout=120)
    found = {p["name"]: p for p in json.loads(out.stdout)["plugins"]}["hermes-recorder"]
    assert found["tools"] == []


#: a general plugin that counts its register(ctx) calls (it keeps per-process state there, as
#: hermes-snow-search and hermes-dreaming do)
ONCE = LOG_SOURCE + '''
import itertools
_count = itertools.count(1)


def register(ctx):
    number = next(_count)

    def on_session_start(session_id, **kw):
        _log("on_session_start", registration=number)

    def pre_llm_call(user_message, **kw):
        _log("pre_llm_call", registration=number)

    ctx.register_hook("on_session_start", on_session_start)
    ctx.register_hook("pre_llm_call", pre_llm_call)
'''


def test_register_runs_once_as_in_hermes(core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermes calls a plugin's register(ctx) once per process and every session shares its
    hooks; a /new and a second session must neither call it again nor split the hooks."""
    drop_folder_plugin(core_home, "once", ONCE)
    run(core_home, [("one", "1"), {"new_session": True, "user": "two", "assistant": "2"},
                    {"new_session": True, "user": "three", "assistant": "3"}],
        providers=["hermes-once"], monkeypatch=monkeypatch)
    home = core_home / "hermes-compat" / "once"
    calls = [json.loads(line) for line in (home / "calls.jsonl").read_text().splitlines()]
    assert [c["event"] for c in calls].count("pre_llm_call") == 3
    assert {c["registration"] for c in calls} == {1}
