"""What ``hermes-core plugins new`` writes: a plugin package whose own tests pass at once.

The package has a pyproject.toml declaring the ``hermes_core.plugins`` entry point, the plugin
module with its config model, a README, and tests built on the conformance suites of
:mod:`hermes_core.testing`. Each kind starts from a small working implementation, not an empty
stub, so the generated tests exercise real behaviour from the first run.
"""

from __future__ import annotations

import datetime
import keyword
import re
import string
from pathlib import Path

from hermes_core import __version__
from hermes_core.errors import HermesCoreError

__all__ = ["KINDS", "ScaffoldError", "scaffold"]

KINDS = ("memory", "context-engine", "tool", "platform")


class ScaffoldError(HermesCoreError):
    """The name or target of ``plugins new`` cannot be used."""


PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "A hermes-core $kind_label plugin"
readme = "README.md"
requires-python = ">=3.11"
license = {text = "MIT"}
classifiers = [
    "License :: OSI Approved :: MIT License",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Typing :: Typed",
]
dependencies = ["hermes-core-kernel>=$core_version"]

[project.optional-dependencies]
test = ["pytest>=8", "jsonschema>=4.20"]

[project.entry-points."hermes_core.plugins"]
$name = "$module"

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
"*" = ["py.typed"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

README = """\
# $dist

A hermes-core $kind_label plugin: `$cls_name`, registered as `$name`.

## Try it

```
hermes-core plugins install .          # or: pip install -e '.[test]'
hermes-core plugins list               # shows $name ($dist)
$select_line
pytest                                 # the generated tests, built on hermes_core.testing
```

## Config

Settings go in the `$name:` section of `$$HERMES_CORE_HOME/config.yaml`, validated by
`$cls_name.Config`; unknown keys are refused.

The hook reference: the docs/reference/ pages of hermes-core, one section per hook.

## License

MIT (see LICENSE, written by `hermes-core plugins new`): change LICENSE and the `license` and
classifier lines of pyproject.toml if you publish under another license.
"""

LICENSE = """\
MIT License

Copyright (c) $year The $dist authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

MEMORY_MODULE = '''\
"""$cls_name: a memory provider that recalls earlier turns sharing words with the new message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hermes_core import MemoryProvider, Tool, hookimpl


class ${cls_name}Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_turns: int = Field(default=500, ge=1, description="turns kept in memory")
    max_recalled: int = Field(default=3, ge=1, description="turns recalled per message")


class $cls_name(MemoryProvider):
    name = "$name"
    Config = ${cls_name}Config
    description = "Recalls earlier turns that share words with the new message"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.turns: list[str] = []
        self.ready: dict[str, str] = {}

    @hookimpl
    def sync_turn(self, user_message, assistant_message):
        # Called on the background worker after each turn: the place for slow work.
        self.turns.append(f"{user_message.content}\\n-> {assistant_message.content}")
        del self.turns[: -self.config.max_turns]

    @hookimpl
    def queue_prefetch(self, query, session):
        words = {w for w in query.lower().split() if len(w) > 3}
        hits = [t for t in self.turns if words & set(t.lower().split())]
        self.ready[session.id] = "\\n\\n".join(hits[-self.config.max_recalled :])

    @hookimpl
    def prefetch(self, query, session):
        # Runs under a deadline on the turn's path: serve what queue_prefetch prepared.
        return self.ready.get(session.id) or None

    @hookimpl
    def get_tools(self):
        return [
            Tool(
                name="${name}_count",
                description="How many turns $name remembers.",
                parameters={"type": "object", "properties": {}},
                handler=lambda args, ctx: {"turns": len(self.turns)},
            )
        ]


@hookimpl
def register_memory_providers(register):
    register($cls_name)
'''

MEMORY_TEST = '''\
import pytest

from hermes_core.testing import MemoryProviderConformance, make_instance
from $module import $cls_name


class Test$cls_name(MemoryProviderConformance):
    recalls_across_sessions = True
    tool_examples = {"${name}_count": {}}

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance($cls_name, "memory-provider", hermes_home)


def test_config_is_validated(hermes_home):
    from hermes_core import ConfigError

    with pytest.raises(ConfigError):
        make_instance($cls_name, "memory-provider", hermes_home,
                      config="$name:\\n  max_turns: 0\\n")
'''

ENGINE_MODULE = '''\
"""$cls_name: a context engine that keeps the most recent turns and notes what it dropped."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hermes_core import CompressionResult, ContextEngine, Message, hookimpl


class ${cls_name}Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    threshold_tokens: int = Field(default=100_000, gt=0, description="compress above this")
    keep_user_turns: int = Field(default=6, ge=1, description="user turns kept verbatim")


class $cls_name(ContextEngine):
    name = "$name"
    Config = ${cls_name}Config
    description = "Keeps the last user turns and notes how many messages were dropped"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.last_prompt_tokens: int | None = None

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        tokens = prompt_tokens or self.last_prompt_tokens
        if tokens is None:
            tokens = sum(len(m.content) for m in messages) // 4
        return tokens > self.config.threshold_tokens

    @hookimpl
    def compress(self, messages, focus_topic, memory_context):
        starts = [i for i, m in enumerate(messages) if m.role == "user"]
        keep = min(len(starts), self.config.keep_user_turns)
        cut = starts[-keep] if starts else len(messages)
        tail = _paired(messages[cut:])
        note = f"[{cut} earlier messages were removed to save context space"
        note += f"; focus: {focus_topic}]" if focus_topic else "]"
        if memory_context:
            note += "\\n" + memory_context
        if tail and tail[0].role == "user":  # merge: never two user messages in a row
            tail[0] = Message("user", note + "\\n\\n" + tail[0].content)
        else:
            tail.insert(0, Message("user", note))
        return CompressionResult(messages=tail, summary=None)

    @hookimpl
    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.prompt_tokens


def _paired(messages):
    """Drop tool calls without results and results without calls."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    called = {c.id for m in messages for c in m.tool_calls}
    return [
        m for m in messages
        if not (m.tool_calls and {c.id for c in m.tool_calls} - answered)
        and not (m.role == "tool" and m.tool_call_id not in called)
    ]


@hookimpl
def register_context_engines(register):
    register($cls_name)
'''

ENGINE_TEST = '''\
import pytest

from hermes_core.testing import ContextEngineConformance, make_instance
from $module import $cls_name


class Test$cls_name(ContextEngineConformance):
    threshold_tokens = 100_000

    @pytest.fixture
    def engine(self, hermes_home):
        return make_instance($cls_name, "context-engine", hermes_home)
'''

TOOL_MODULE = '''\
"""$cls_name: a tool that counts words and characters in a text."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hermes_core import Tool, ToolContext, hookimpl


class ${cls_name}Args(BaseModel):
    text: str = Field(description="the text to measure")


def measure(args: ${cls_name}Args, ctx: ToolContext) -> dict:
    return {"words": len(args.text.split()), "characters": len(args.text)}


TOOL = Tool(
    name="$name",
    description="Count the words and characters of a text.",
    input_model=${cls_name}Args,
    handler=measure,
    parallel_safe=True,  # no shared state: may run beside other parallel-safe calls
)


@hookimpl
def register_tools(register):
    register(TOOL)
'''

TOOL_TEST = '''\
import json

import jsonschema
import pytest

from hermes_core import ToolError
from hermes_core.testing import make_host, registered_plugin
import $module


def test_tool_is_registered_and_valid(hermes_home):
    host = make_host(hermes_home, builtins=False)
    with registered_plugin(host, $module, name="$name"):
        tool, plugin = host.tools()["$name"]
    assert plugin == "$name"
    jsonschema.Draft202012Validator.check_schema(tool.input_schema())


def test_tool_answers_json():
    out = json.loads($module.TOOL.invoke({"text": "two words"}, None))
    assert out == {"words": 2, "characters": 9}


def test_bad_arguments_are_a_tool_error():
    with pytest.raises(ToolError):
        $module.TOOL.invoke({"txt": "typo"}, None)
'''

PLATFORM_MODULE = '''\
"""$cls_name: a platform adapter fed from an in-process queue (a starting point for real ones)."""

from __future__ import annotations

import queue
import threading

from pydantic import BaseModel, ConfigDict, Field

from hermes_core import IncomingMessage, Platform, hookimpl


class ${cls_name}Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    poll_seconds: float = Field(default=0.05, gt=0)


class $cls_name(Platform):
    name = "$name"
    Config = ${cls_name}Config
    description = "Reads messages from a queue and keeps the replies"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.inbox: queue.Queue[tuple[str, str]] = queue.Queue()
        self.outbox: list[tuple[str, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @hookimpl
    def connect(self, dispatcher):
        def serve():
            while not self._stop.is_set():
                try:
                    key, text = self.inbox.get(timeout=self.config.poll_seconds)
                except queue.Empty:
                    continue
                reply = dispatcher.handle(IncomingMessage("$name", key, text))
                self.outbox.append((key, reply))

        self._thread = threading.Thread(target=serve, name="$name", daemon=True)
        self._thread.start()

    @hookimpl
    def disconnect(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @hookimpl
    def send(self, conversation_key, text):
        self.outbox.append((conversation_key, text))
        return len(self.outbox)


@hookimpl
def register_platforms(register):
    register($cls_name)
'''

PLATFORM_TEST = '''\
import time

from hermes_core.testing import make_instance
from $module import $cls_name


class Dispatcher:
    def handle(self, message):
        return f"echo: {message.text}"

    def stream(self, message):
        yield f"echo: {message.text}"


def test_messages_reach_the_dispatcher_and_replies_come_back(hermes_home):
    platform = make_instance($cls_name, "platform", hermes_home)
    platform.connect(Dispatcher())
    platform.inbox.put(("alice", "hello"))
    deadline = time.monotonic() + 5
    while not platform.outbox and time.monotonic() < deadline:
        time.sleep(0.01)
    platform.disconnect()
    assert platform.outbox == [("alice", "echo: hello")]


def test_send(hermes_home):
    platform = make_instance($cls_name, "platform", hermes_home)
    assert platform.send("bob", "reminder") == 1
'''

TEMPLATES = {
    "memory": (MEMORY_MODULE, MEMORY_TEST, "memory provider",
               "hermes-core config set memory.providers '[file_memory, $name]'"),
    "context-engine": (ENGINE_MODULE, ENGINE_TEST, "context engine",
                       "hermes-core config set context.engine $name"),
    "tool": (TOOL_MODULE, TOOL_TEST, "tool", "# tools are offered to the model automatically"),
    "platform": (PLATFORM_MODULE, PLATFORM_TEST, "platform adapter",
                 "# platforms are started by their front end"),
}


def _names(name: str) -> dict[str, str]:
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,40}", name):
        raise ScaffoldError(
            f"plugin name {name!r} is invalid: use lowercase letters, digits, '-' or '_', "
            "starting with a letter (e.g. my-notes)")
    module = name.replace("-", "_")
    if keyword.iskeyword(module):
        raise ScaffoldError(f"plugin name {name!r} is a Python keyword; pick another")
    cls_name = "".join(part.capitalize() for part in re.split(r"[-_]", name))
    dist = name if name.startswith("hermes-core-") else f"hermes-core-{name}"
    return {"name": module, "module": module, "cls_name": cls_name, "dist": dist,
            "core_version": __version__}


def scaffold(name: str, kind: str, directory: Path) -> Path:
    """Write the package for ``name`` into ``directory/<name>``; return that folder."""
    if kind not in TEMPLATES:
        raise ScaffoldError(f"unknown kind {kind!r}; use one of: {', '.join(KINDS)}")
    values = _names(name)
    module_src, test_src, label, select = TEMPLATES[kind]
    values["kind_label"] = label
    values["select_line"] = string.Template(select).substitute(values)
    root = directory / name
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ScaffoldError(f"{existing} exists and is not a folder, so {root} cannot be "
                            "created; pick another --dir or name")
    if root.exists() and any(root.iterdir()):
        raise ScaffoldError(f"{root} already exists and is not empty; pick another --dir or name")
    values["year"] = str(datetime.date.today().year)
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        "LICENSE": LICENSE,
        f"src/{values['module']}/py.typed": "",
        f"src/{values['module']}/__init__.py": module_src,
        f"tests/test_{values['module']}.py": test_src,
    }
    for rel, template in files.items():
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(string.Template(template).substitute(values), encoding="utf-8")
        except OSError as exc:
            raise ScaffoldError(f"cannot write {path}: {exc.strerror or exc}; pick a --dir you "
                                "can write to") from None
    return root
