"""Small Hermes-style plugins for the adapter tests, written as Hermes authors write them (a
``register(ctx)`` in a folder plugin's ``__init__.py``, subclassing ``agent.memory_provider``)."""

from __future__ import annotations

#: a provider that logs every call it gets (as JSON lines in its own hermes_home) and remembers
#: the user's words; ``messages`` is deliberately absent from its sync_turn
RECORDER = '''
import json, os
from pathlib import Path
from agent.memory_provider import MemoryProvider
from tools.registry import tool_error
from hermes_constants import get_hermes_home


class Recorder(MemoryProvider):
    name = "recorder"

    def __init__(self):
        self.home = None
        self.session = None

    def _log(self, event, **data):
        with open(Path(self.home) / "calls.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **data}) + "\\n")

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.home = kwargs["hermes_home"]
        self.session = session_id
        self._log("initialize", session_id=session_id, kwargs=kwargs,
                  constants_home=str(get_hermes_home()), env_home=os.environ.get("HERMES_HOME"))

    def get_config_schema(self):
        return [{"key": "greeting", "description": "how to greet", "default": "hi",
                 "choices": ["hi", "hello"]},
                {"key": "token", "description": "a key", "secret": True, "env_var": "RECORDER_TOKEN"}]

    def save_config(self, values, hermes_home):
        Path(hermes_home, "recorder.json").write_text(json.dumps(values), encoding="utf-8")

    def system_prompt_block(self):
        return "Recorder is on."

    def prefetch(self, query, *, session_id=""):
        notes = Path(self.home) / "notes.txt"
        seen = notes.read_text(encoding="utf-8") if notes.exists() else ""
        return f"recorder recalls: {seen.strip()[-200:]}" if seen else ""

    def sync_turn(self, user_content, assistant_content, *, session_id=""):
        self._log("sync_turn", session_id=session_id)
        with open(Path(self.home) / "notes.txt", "a", encoding="utf-8") as f:
            f.write(user_content + "\\n")

    def on_session_end(self, messages):
        self._log("on_session_end", count=len(messages), roles=sorted({m["role"] for m in messages}))

    def on_memory_write(self, action, target, content, metadata=None):
        self._log("on_memory_write", action=action, target=target, content=content)

    def get_tool_schemas(self):
        return [
            {"name": "recorder_notes", "description": "the notes",
             "parameters": {"type": "object", "properties": {}}},
            {"type": "function", "function": {"name": "recorder_fail", "description": "fails",
             "parameters": {"type": "object", "properties": {"why": {"type": "string"}}}}},
        ]

    def handle_tool_call(self, tool_name, args, **kwargs):
        if tool_name == "recorder_fail":
            return tool_error(args.get("why", "no reason"))
        notes = Path(self.home) / "notes.txt"
        return json.dumps({"notes": notes.read_text(encoding="utf-8") if notes.exists() else ""})

    def shutdown(self):
        self._log("shutdown")


def register(ctx):
    ctx.register_memory_provider(Recorder())
    ctx.register_skill("recorder-notes", "SKILL.md")
    ctx.register_hook("transform_llm_output", lambda **kw: None)
'''

#: a provider whose sync_turn takes ``messages`` and which follows session switches itself
SWITCHER = '''
import json
from pathlib import Path
from agent.memory_provider import MemoryProvider


class Switcher(MemoryProvider):
    name = "switcher"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.home = Path(kwargs["hermes_home"])
        self._log({"event": "initialize", "session_id": session_id})

    def _log(self, entry):
        with open(self.home / "calls.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\\n")

    def get_tool_schemas(self):
        return []

    def sync_turn(self, user_content, assistant_content, *, session_id="", messages=None):
        self._log({"event": "sync_turn", "messages": messages})

    def on_session_switch(self, new_session_id, *, parent_session_id="", reset=False, **kwargs):
        self._log({"event": "switch", "new": new_session_id, "parent": parent_session_id,
                   "reset": reset, "kwargs": kwargs})


def register(ctx):
    ctx.register_memory_provider(Switcher())
'''

#: misbehaving providers, selected by the class attribute ``mode``
BROKEN = '''
import json, threading
from agent.memory_provider import MemoryProvider

MODE = "{mode}"
HANG = threading.Event()


class Broken(MemoryProvider):
    name = "broken"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        if MODE == "raise-init":
            raise RuntimeError("cannot open the broken store")

    def prefetch(self, query, *, session_id=""):
        if MODE == "hang-prefetch":
            HANG.wait(3600)
        if MODE == "bad-values":
            return {{"not": "a string"}}
        return ""

    def get_tool_schemas(self):
        if MODE == "bad-values":
            return [{{"name": "broken_plain", "description": "answers in plain text",
                      "parameters": {{"type": "object", "properties": {{}}}}}},
                    {{"name": "broken_array", "description": "odd schema",
                      "parameters": {{"type": "array"}}}}]
        return []

    def handle_tool_call(self, tool_name, args, **kwargs):
        return "plain words, not JSON"


def register(ctx):
    ctx.register_memory_provider(Broken())
'''

#: a folder plugin that cannot import
UNIMPORTABLE = '''
import a_module_nobody_installed
from agent.memory_provider import MemoryProvider

def register(ctx):
    ctx.register_memory_provider(None)
'''

#: a folder plugin needing a part of Hermes the bridge does not stand in for
NEEDS_HERMES = '''
from agent.memory_provider import MemoryProvider
from agent.context_compressor import ContextCompressor

def register(ctx):
    ctx.register_memory_provider(None)
'''

#: a Hermes context engine keeping the last N messages
ENGINE = '''
from agent.context_engine import ContextEngine


class KeepLast(ContextEngine):
    name = "keeplast"
    threshold_tokens = 50

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.get("prompt_tokens", 0)

    def should_compress(self, prompt_tokens=None):
        return (prompt_tokens or 0) > self.threshold_tokens

    def compress(self, messages, current_tokens=None, focus_topic=None):
        self.compression_count += 1
        tail = messages[-2:]
        return [{{"role": "user", "content": "[earlier turns dropped by keeplast]"}},
                {{"role": "assistant", "content": "Understood."}}] + tail

    def get_tool_schemas(self):
        return [{{"type": "function", "function": {{"name": "keeplast_count",
                 "description": "compactions so far", "parameters": {{"type": "object",
                 "properties": {{}}}}}}}}]

    def handle_tool_call(self, name, args, **kwargs):
        import json
        return json.dumps({{"compactions": self.compression_count}})


def register(ctx):
    ctx.register_context_engine(KeepLast())
'''

#: a provider whose ``initialize`` raises the first ``{fail_times}`` times (its attempts are
#: counted in a file of its hermes_home), then recalls a fixed line
FLAKY = '''
from pathlib import Path
from agent.memory_provider import MemoryProvider

FAIL_TIMES = {fail_times}


class Flaky(MemoryProvider):
    name = "flaky"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        attempts = Path(kwargs["hermes_home"]) / "attempts.log"
        with open(attempts, "a", encoding="utf-8") as f:
            f.write(session_id + "\\n")
        if len(attempts.read_text(encoding="utf-8").split()) <= FAIL_TIMES:
            raise OSError("the flaky store is not mounted")

    def prefetch(self, query, *, session_id=""):
        return "flaky recall"

    def get_tool_schemas(self):
        return [{{"name": "flaky_ping", "description": "answers pong",
                  "parameters": {{"type": "object", "properties": {{}}}}}}]

    def handle_tool_call(self, tool_name, args, **kwargs):
        return '{{"answer": "pong"}}'


def register(ctx):
    ctx.register_memory_provider(Flaky())
'''

#: a provider holding a SQLite connection opened in ``initialize`` and used from every method,
#: as published providers do (sqlite3 refuses a connection used from another thread); it logs
#: the thread of each call
THREAD_BOUND = '''
import sqlite3, threading
from pathlib import Path
from agent.memory_provider import MemoryProvider


class ThreadBound(MemoryProvider):
    name = "threadbound"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.db = sqlite3.connect(Path(kwargs["hermes_home"]) / "turns.db")
        self.db.execute("CREATE TABLE IF NOT EXISTS turns (user TEXT, assistant TEXT)")
        self.db.execute("CREATE TABLE IF NOT EXISTS calls (method TEXT, thread INTEGER)")
        self._log("initialize")

    def _log(self, method):
        self.db.execute("INSERT INTO calls VALUES (?, ?)", (method, threading.get_ident()))
        self.db.commit()

    def system_prompt_block(self):
        self._log("system_prompt_block")
        return ""

    def prefetch(self, query, *, session_id=""):
        self._log("prefetch")
        rows = self.db.execute("SELECT user FROM turns").fetchall()
        return "\\n".join("- " + r[0] for r in rows)

    def sync_turn(self, user_content, assistant_content, *, session_id=""):
        self._log("sync_turn")
        self.db.execute("INSERT INTO turns VALUES (?, ?)", (user_content, assistant_content))
        self.db.commit()

    def get_tool_schemas(self):
        return []

    def shutdown(self):
        self._log("shutdown")
        self.db.close()


def register(ctx):
    ctx.register_memory_provider(ThreadBound())
'''

#: a provider whose first prefetch loads something slow (here: it waits for a file the test
#: writes, as a model import waits for the disk); it logs when that first call ends
SLOW_START = '''
import json, time
from pathlib import Path
from agent.memory_provider import MemoryProvider


class SlowStart(MemoryProvider):
    name = "slowstart"

    def __init__(self):
        self.home = None
        self.loaded = False
        self.said = []

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.home = Path(kwargs["hermes_home"])

    def _log(self, event, **data):
        with open(self.home / "calls.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **data}) + "\\n")

    def prefetch(self, query, *, session_id=""):
        if not self.loaded:
            self._log("loading")
            deadline = time.monotonic() + 60
            while not (self.home / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.loaded = True
            self._log("loaded")
        return "slowstart recalls: " + " | ".join(self.said) if self.said else ""

    def sync_turn(self, user_content, assistant_content, *, session_id=""):
        self.said.append(user_content)

    def get_tool_schemas(self):
        return []


def register(ctx):
    ctx.register_memory_provider(SlowStart())
'''

#: a provider that contributes to the compaction summary and keeps what memory writes it is told
#: of, with their metadata (Hermes' ``on_pre_compress`` and ``on_memory_write``)
FLUSHER = '''
import json
from pathlib import Path
from agent.memory_provider import MemoryProvider


class Flusher(MemoryProvider):
    name = "flusher"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.home = Path(kwargs["hermes_home"])

    def _log(self, event, **data):
        with open(self.home / "calls.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **data}) + "\\n")

    def on_pre_compress(self, messages):
        self._log("on_pre_compress", messages=messages)
        return "Keep: the user's hives are Ada and Grace."

    def on_memory_write(self, action, target, content, metadata=None):
        self._log("on_memory_write", content=content, metadata=metadata)

    def get_tool_schemas(self):
        return []


def register(ctx):
    ctx.register_memory_provider(Flusher())
'''
