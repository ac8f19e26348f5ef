"""Plugins written for a newer Hermes Agent than 0.19.0: what they import from it and call on
``ctx`` (strict additions of the newer versions) works under the bridge as under newer Hermes.

Each plugin here is Hermes-style (it imports Hermes' modules, which the bridge's stand-ins
serve) and is driven by a real Agent; only the model's words are scripted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import bridge_agent, drop_folder_plugin

#: a provider using the helpers newer Hermes added to agent.memory_provider
NEWER = '''
import json, threading
from agent.memory_provider import (INDICATOR_GLYPH, PRE_COMPRESS_CHECKPOINT_API_VERSION,
                                   MemoryProvider, RecallStatus, ctx_bound, is_trivial_prompt,
                                   spawn_context_thread)
from hermes_constants import get_hermes_home


def _log(**fields):
    with open(get_hermes_home() / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(fields) + "\\n")


def _write_from_a_thread(text, *, into):
    (get_hermes_home() / into).write_text(text, encoding="utf-8")


class Newer(MemoryProvider):
    name = "newer"
    pre_compress_checkpoint_api_version = PRE_COMPRESS_CHECKPOINT_API_VERSION

    def is_available(self):
        return True

    def initialize(self, session_id, **kw):
        get_hermes_home().mkdir(parents=True, exist_ok=True)
        self._status = None
        # newer Hermes' helper: the background thread keeps the caller's Hermes home
        writer = spawn_context_thread(_write_from_a_thread, name="newer-writer",
                                      args=("written by the background thread",),
                                      kwargs={"into": "from-thread.txt"})
        writer.start()
        writer.join()
        # a callable bound here, run later on a plain thread
        bound = threading.Thread(target=ctx_bound(_write_from_a_thread),
                                 args=("written by a bound callable",), kwargs={"into": "bound.txt"})
        bound.start()
        bound.join()

    def get_tool_schemas(self):
        return []

    def prefetch(self, query, *, session_id=""):
        if is_trivial_prompt(query):
            self._status = None
            _log(query=query, recalled=False)
            return ""
        self._status = RecallStatus("Newer", 1, glyph="\\N{EYE}")
        _log(query=query, recalled=True, status=[self._status.provider_label,
                                                 self._status.count, self._status.glyph],
             default_glyph=RecallStatus("x", 0).glyph == INDICATOR_GLYPH)
        return "the user lives in Rotterdam"

    def recall_status(self):
        return self._status


def register(ctx):
    ctx.register_memory_provider(Newer())
'''


def _log(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_provider_using_newer_hermes_helpers(core_home: Path) -> None:
    """RecallStatus with its glyph, is_trivial_prompt as newer Hermes decides it, and
    spawn_context_thread with args/kwargs (and ctx_bound), whose thread writes into the plugin's own Hermes
    home (the folder the bridge gives it), not the common parent every plugin shares."""
    drop_folder_plugin(core_home, "newer", NEWER)
    agent = bridge_agent(core_home, "memory:\n  providers: [hermes-newer]\n"
                                    "  prefetch_timeout: 10\n")
    try:
        for text in ("where do I live?", "go ahead", "thanks!", "ok ok", "k8s?"):
            agent.run_turn(text)
    finally:
        agent.close()
    own = core_home / "hermes-compat" / "newer"
    assert (own / "from-thread.txt").read_text(encoding="utf-8") == \
        "written by the background thread"
    assert (own / "bound.txt").read_text(encoding="utf-8") == "written by a bound callable"
    assert not (core_home / "hermes-compat" / "from-thread.txt").exists()
    calls = _log(own)
    assert [(c["query"], c["recalled"]) for c in calls] == [
        ("where do I live?", True), ("go ahead", False), ("thanks!", False), ("ok ok", True),
        ("k8s?", True)]
    assert calls[0]["status"] == ["Newer", 1, "\N{EYE}"]
    assert calls[0]["default_glyph"] is True


#: an engine written for a newer Hermes: its compress uses the base class's newer defaults
NEWER_ENGINE = '''
from agent.context_engine import ContextEngine


class Trim(ContextEngine):
    name = "trim"
    emit_automatic_compaction_status = False

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.get("prompt_tokens", 0)

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False,
                 memory_context=""):
        messages, _pruned = self.prune_tool_results_only(messages, current_tokens)
        note = self.get_automatic_compaction_status_message(phase="compress",
                                                            default_message="trimmed")
        self.compression_count += 1
        head = {"role": "user", "content": f"[earlier turns dropped; status: {note}]"}
        return [head, {"role": "assistant", "content": "Understood."}] + messages[-2:]


def register(ctx):
    ctx.register_context_engine(Trim())
'''


def test_an_engine_using_newer_hermes_defaults(core_home: Path) -> None:
    """An engine whose compress calls the newer base class's prune_tool_results_only and
    get_automatic_compaction_status_message (their defaults: nothing pruned; None when the
    engine keeps automatic compactions silent) compacts as under newer Hermes."""
    drop_folder_plugin(core_home, "trim", NEWER_ENGINE)
    agent = bridge_agent(core_home, "memory:\n  providers: []\ncontext:\n  engine: hermes-trim\n")
    try:
        for text in ("u1", "u2", "u3"):
            agent.run_turn(text)
        record = agent.compact()
        assert record is not None and record.messages_after < record.messages_before
        assert agent.history[0].content == "[earlier turns dropped; status: None]"
    finally:
        agent.close()


#: a general plugin whose register(ctx) uses what newer Hermes added to ctx
NEWER_CTX = '''
import json
from hermes_constants import get_hermes_home


def register(ctx):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    seen = {"plugin_id": ctx.plugin_id, "greeting": ctx.get_config("greeting", "hello"),
            "override": ctx.has_capability("tools.override"), "peer": ctx.has_plugin("other")}
    try:
        ctx.set_config("greeting", "hi")
    except PermissionError:
        seen["set_config"] = "refused"
    (home / "registered.json").write_text(json.dumps(seen), encoding="utf-8")

    def on_session_end(turn_id, completed, **kw):
        with open(home / "ends.txt", "a", encoding="utf-8") as out:
            out.write(f"{completed}\\n")

    ctx.register_hook("on_session_end", on_session_end)
    ctx.on_unload(lambda: (home / "unloaded.txt").write_text("bye", encoding="utf-8"))
    ctx.on_unload(lambda: (home / "withdrawn.txt").write_text("no", encoding="utf-8")).dispose()
'''


def test_a_plugin_using_newer_hermes_ctx(core_home: Path) -> None:
    """ctx.plugin_id, get_config / set_config, has_capability, has_plugin answer as a Hermes
    with no settings and no grants does (set_config refused, as in a managed install); the
    plugin's hooks run; its on_unload callbacks run when it shuts down, a disposed one not."""
    drop_folder_plugin(core_home, "newctx", NEWER_CTX)
    agent = bridge_agent(core_home, "memory:\n  providers: [hermes-newctx]\n")
    own = core_home / "hermes-compat" / "newctx"
    try:
        agent.run_turn("hello")
        assert not (own / "unloaded.txt").exists()
    finally:
        agent.close()
    assert json.loads((own / "registered.json").read_text(encoding="utf-8")) == {
        "plugin_id": "newctx", "greeting": "hello", "override": False, "peer": False,
        "set_config": "refused"}
    assert (own / "ends.txt").read_text(encoding="utf-8") == "True\n"
    assert (own / "unloaded.txt").read_text(encoding="utf-8") == "bye"
    assert not (own / "withdrawn.txt").exists()


def test_hooks_of_newer_hermes_are_named_with_why_they_do_not_fire() -> None:
    """A plugin registering a hook newer Hermes added hears why hermes-core never fires it
    (``hermes-core hermes plugins`` and the plugin's warnings show it); a name no Hermes
    defines is still called unknown."""
    from hermes_core_hermes_compat.general import Registered, unmapped_hooks

    registered = Registered()
    for hook in ("on_stream_delta", "agent_loop_stopped", "pre_command", "on_made_up"):
        registered.hooks[hook] = [print]
    named = dict(line.split(" (", 1) for line in unmapped_hooks(registered))
    assert named["on_stream_delta"].startswith("a newer Hermes hook: hermes-core streams")
    assert "on_session_end (interrupted)" in named["agent_loop_stopped"]
    assert named["pre_command"].startswith("a newer Hermes hook")
    assert named["on_made_up"] == "not a hook Hermes 0.19.0 defines)"
