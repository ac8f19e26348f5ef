"""Tool routing, collisions, parallel batches, errors as results and the budget (hermes_core.toolrun)."""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest
from agent_support import make_host
from pydantic import BaseModel

from hermes_core import MemoryProvider, Session, Tool, ToolError, hookimpl
from hermes_core.errors import RegistryError
from hermes_core.toolrun import IterationBudget, ToolRouter, paths_overlap
from hermes_core.types import ToolCall

SESSION = Session(id="s1")
OBJ = {"type": "object", "properties": {"path": {"type": "string"}}}


def tool(name, handler, **kw):
    return Tool(name=name, description=f"the {name} tool", parameters=OBJ, handler=handler, **kw)


class Concurrency:
    """Measures how many handlers run at the same time."""

    def __init__(self, hold=0.05):
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.hold = hold

    def handler(self, args, ctx):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.hold)
        with self.lock:
            self.now -= 1
        return {"path": args.get("path"), "plugin": ctx.plugin_name, "call": ctx.tool_call_id}


def calls(name, *paths):
    return [ToolCall(id=f"c{i}", name=name, arguments={"path": p}) for i, p in enumerate(paths)]


def test_calls_are_routed_to_the_owning_plugin(home):
    class Notes(MemoryProvider):
        name = "notes"

        @hookimpl
        def get_tools(self):
            return [tool("note", lambda args, ctx: f"noted by {ctx.plugin_name} in {ctx.session.id}")]

    host = make_host(home, providers=[Notes], tools=[tool("echo", lambda a, c: c.plugin_name)])
    router = ToolRouter.from_host(host)
    assert router.names() == ["echo", "note"]
    assert [s["name"] for s in router.schemas()] == ["echo", "note"]
    out = router.run([ToolCall("a", "note", {}), ToolCall("b", "echo", {})], SESSION)
    assert [o.content for o in out] == ["noted by memory-provider:notes in s1", "test_plugins"]
    assert [o.plugin for o in out] == ["memory-provider:notes", "test_plugins"]


def test_two_plugins_offering_one_tool_is_an_error_naming_both(home):
    class A(MemoryProvider):
        name = "prov_a"

        @hookimpl
        def get_tools(self):
            return [tool("search", lambda a, c: "a")]

    host = make_host(home, providers=[A], tools=[tool("search", lambda a, c: "b")])
    with pytest.raises(RegistryError) as err:
        ToolRouter.from_host(host)
    assert "'search'" in str(err.value)
    assert "test_plugins" in str(err.value) and "memory-provider:prov_a" in str(err.value)


def test_two_registered_tools_with_one_name_is_an_error_naming_both(home):
    class Other:
        @hookimpl
        def register_tools(self, register):
            register(tool("dup", lambda a, c: "other"))

    host = make_host(home, tools=[tool("dup", lambda a, c: "first")],
                     extra_plugins=[("other_plugin", Other())])
    with pytest.raises(RegistryError, match=r"'dup'.*'test_plugins' and 'other_plugin'"):
        ToolRouter.from_host(host)


def test_parallel_safe_calls_on_distinct_paths_run_concurrently(tmp_path):
    # the three wait for each other (bounded): all three at once whatever the machine's load
    # (a fixed 50 ms hold saw only two together once, under three test runs at once)
    c = Rendezvous(until=3)
    router = ToolRouter({"read": (tool("read", c.handler, parallel_safe=True,
                                       path_arguments=("path",)), "fs")})
    batch = calls("read", str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c"))
    out = router.run(batch, SESSION)
    assert c.peak == 3
    assert all(o.parallel for o in out)
    assert [o.call.id for o in out] == ["c0", "c1", "c2"]  # results keep the model's order


class Rendezvous(Concurrency):
    """Handlers wait (bounded) until ``until`` of them run at once, then all go on: the peak is
    exactly the pool's limit whatever the machine's load, and more than it if the pool allows."""

    def __init__(self, until):
        super().__init__(hold=0)
        self.cond = threading.Condition(self.lock)
        self.until = until
        self.met = False

    def handler(self, args, ctx):
        with self.cond:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.cond.notify_all()
            self.met = self.cond.wait_for(lambda: self.met or self.now >= self.until, timeout=10)
            self.cond.notify_all()
            self.now -= 1
        return {"path": args.get("path")}


def test_at_most_eight_calls_run_at_once(tmp_path):
    c = Rendezvous(until=8)
    router = ToolRouter({"read": (tool("read", c.handler, parallel_safe=True), "fs")})
    out = router.run(calls("read", *[f"f{i}" for i in range(12)]), SESSION)
    assert c.peak == 8 and len(out) == 12


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        (["/data/x.txt", "/data/x.txt"], "same file"),
        (["/data", "/data/sub/x.txt"], "a folder and a file inside it"),
        (["/data/./x.txt", "/data/y/../x.txt"], "same file, spelled differently"),
    ],
)
def test_overlapping_paths_run_one_after_the_other(paths, why):
    c = Concurrency(hold=0.01)
    router = ToolRouter({"write": (tool("write", c.handler, parallel_safe=True,
                                        path_arguments=("path",)), "fs")})
    out = router.run(calls("write", *paths), SESSION)
    assert c.peak == 1, why
    assert not any(o.parallel for o in out)


def test_one_unsafe_tool_makes_the_batch_sequential():
    c = Concurrency(hold=0.01)
    router = ToolRouter({
        "read": (tool("read", c.handler, parallel_safe=True), "fs"),
        "shell": (tool("shell", c.handler), "sh"),
    })
    batch = [ToolCall("1", "read", {"path": "a"}), ToolCall("2", "shell", {"path": "b"})]
    assert not router.parallel_batch(batch)
    router.run(batch, SESSION)
    assert c.peak == 1


def test_paths_overlap():
    assert paths_overlap(["/a/b"], ["/a/b/c"])
    assert not paths_overlap(["/a/b"], ["/a/bc"])
    assert not paths_overlap([], ["/a"])


def test_failures_become_error_results_and_never_raise(caplog):
    caplog.set_level(logging.ERROR, logger="hermes_core")

    class Args(BaseModel):
        n: int

    def crash(args, ctx):
        raise KeyError("boom")

    def refuse(args, ctx):
        raise ToolError("the store is full; remove an entry first")

    router = ToolRouter({
        "crash": (tool("crash", crash), "crashy_plugin"),
        "refuse": (tool("refuse", refuse), "polite_plugin"),
        "typed": (Tool(name="typed", description="d", input_model=Args, handler=lambda a, c: a.n),
                  "typed_plugin"),
    })
    out = router.run([ToolCall("1", "crash", {}), ToolCall("2", "refuse", {}),
                      ToolCall("3", "typed", {"n": "not a number"}), ToolCall("4", "nope", {}),
                      ToolCall("5", "typed", {"n": 4})], SESSION)
    assert [o.is_error for o in out] == [True, True, True, True, False]
    assert "KeyError" in out[0].content and "boom" in out[0].content
    assert out[1].content == "Error: the store is full; remove an entry first"
    assert "invalid arguments for tool 'typed'" in out[2].content
    assert "no tool named 'nope'" in out[3].content and "crash, refuse, typed" in out[3].content
    assert out[4].content == "4"
    assert "crashy_plugin" in caplog.text and "crash" in caplog.text


def test_budget_notes_at_70_and_90_percent():
    budget = IterationBudget(10)
    notes = []
    for _ in range(10):
        budget.spend()
        notes.append(budget.note())
    assert notes[:6] == [None] * 6
    assert "Wrap up" in notes[6] and "7 of 10" in notes[6] and "Wrap up" in notes[7]
    assert "Respond now" in notes[8]
    assert "all 10 model calls" in notes[9] and budget.exhausted
    with pytest.raises(ValueError):
        IterationBudget(0)


def test_default_budget_thresholds():
    budget = IterationBudget()
    for _ in range(62):
        budget.spend()
    assert budget.note() is None
    budget.spend()
    assert "Wrap up" in budget.note()
    for _ in range(81 - 63):
        budget.spend()
    assert "Respond now" in budget.note()


@pytest.mark.parametrize(("change", "says"), [
    ({"name": "has space"}, "tool name 'has space' is invalid"),
    ({"handler": "not callable"}, "'handler' must be callable"),
    ({"parameters": {"type": "array"}}, "must be a JSON schema with \"type\": \"object\""),
])
def test_a_malformed_tool_is_refused_when_it_is_made(change, says):
    fields = {"name": "ok", "description": "d", "parameters": {"type": "object"},
              "handler": lambda args, ctx: "x", **change}
    with pytest.raises(ValueError, match=re.escape(says)):
        Tool(**fields)


def test_an_async_tool_handler_is_refused_when_the_tool_is_made():
    async def lookup(args, ctx):
        return "never awaited"

    with pytest.raises(ValueError, match=r"tool 'lookup': 'handler' is `async def`.*plain `def`"):
        Tool(name="lookup", description="d", parameters={"type": "object"}, handler=lookup)


def test_every_tools_result_and_error_text_is_bounded(home):
    """One answer must not fill the model's context: a 300,000-character result keeps its head
    and tail with a note of what was left out; so does a tool's runaway error text."""
    from hermes_core.fence import MAX_TOOL_RESULT_CHARS

    def huge(args, ctx):
        return "HEAD" + "x" * 300_000 + "TAIL"

    def failing(args, ctx):
        raise ToolError("bad input: " + "y" * 300_000)

    host = make_host(home, tools=[tool("huge", huge), tool("failing", failing),
                                  tool("small", lambda a, c: "fine")])
    router = ToolRouter.from_host(host)
    big, bad, small = router.run([ToolCall("a", "huge", {}), ToolCall("b", "failing", {}),
                                  ToolCall("c", "small", {})], SESSION)
    assert big.content.startswith("HEAD") and big.content.endswith("TAIL")
    assert "characters of this 'huge' tool result left out" in big.content
    assert len(big.content) < MAX_TOOL_RESULT_CHARS + 200 and not big.is_error
    assert bad.is_error and bad.content.startswith("Error: bad input")
    assert len(bad.content) < MAX_TOOL_RESULT_CHARS + 200
    assert small.content == "fine"
