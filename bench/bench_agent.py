"""Agent-loop benchmarks: kernel overhead per turn, and replay speed on the long example.

Prints medians and their ratio to the targets of issue 6 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_agent.py [--turns 2000] [--runs 5]

* **Kernel overhead per turn**: ``Agent.run_turn`` with N memory providers that do no I/O
  (``system_prompt_block``, ``on_message``, ``prefetch``, ``sync_turn``, ``queue_prefetch``), a
  context engine that never compacts, and a stub LLM that answers at once. What is timed is the
  kernel: archiving fan-out, prefetch on the providers' lanes under the deadline, fencing, the
  engine's hooks, queuing the turn's sync on the worker. The worker's own run of ``sync_turn`` /
  ``queue_prefetch`` happens off the turn; it is flushed between turns, outside the timing, and
  reported separately as the sustained figure (turns back to back, worker competing for the GIL).
* **Delegation**: one turn that delegates one task (parent call, child's call, parent's answer)
  against the same three scripted model calls run inline (a no-op tool in place of
  ``delegate_task``), alternated A B A B; the difference is the per-child overhead (child host,
  its engine instance, child session, thread, ``on_delegation``). Target <= 5 ms per child.
* **The openai client's layer**: ``OpenAIClient.respond`` against the same request made directly
  with the openai SDK, both on the loopback OpenAI-compatible server, alternated A B A B on a
  20-message history with tool calls: the per-call overhead of the layer (conversion both ways,
  usage, stop reason; target <= 0.5 ms) and the time to the first streamed token it adds
  (target <= 1 ms). Medians of the paired differences.
* **Replay**: ``hermes-core replay examples/long-incident.jsonl`` through the library with the
  built-in stack (file memory, compressor), in a fresh scratch home per run; turns per second.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_core import ContextEngine, MemoryProvider, PluginHost, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import load_config, parse_config_text
from hermes_core.llm import LLMResponse
from hermes_core.testing import CannedLLM
from hermes_core.types import ToolCall, Usage

ROOT = Path(__file__).resolve().parents[1]
TARGET_OVERHEAD_MS = 1.0  # with 10 providers
TARGET_DELEGATION_MS = 5.0  # per child, the model excluded
TARGET_LAYER_MS = 0.5  # the model client's layer per call, against a direct SDK call
TARGET_FIRST_TOKEN_MS = 1.0  # time to the first streamed token added by the layer


class Quiet(MemoryProvider):
    @hookimpl
    def system_prompt_block(self, session):
        return f"{self.name}: a frozen block"

    @hookimpl
    def on_message(self, message, session):
        return None

    @hookimpl
    def prefetch(self, query, session):
        return f"{self.name} recalls something about the query"

    @hookimpl
    def sync_turn(self, user_message, assistant_message, session, messages):
        return None

    @hookimpl
    def queue_prefetch(self, query, session):
        return None


class Never(ContextEngine):
    name = "bench_engine"

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return False

    @hookimpl
    def update_from_response(self, usage):
        return None


def make_agent(home: Path, providers: int) -> Agent:
    classes = [type(f"Q{i}", (Quiet,), {"name": f"q{i}"}) for i in range(providers)]

    class Reg:
        @hookimpl
        def register_memory_providers(self, register):
            for cls in classes:
                register(cls)

        @hookimpl
        def register_context_engines(self, register):
            register(Never)

    names = ", ".join(c.name for c in classes)
    config = parse_config_text(f"memory:\n  providers: [{names}]\ncontext:\n  engine: bench_engine\n",
                               home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("bench", Reg())])
    return Agent.create(host, CannedLLM())  # answers at once; the only fake


def turn_overhead(providers: int, turns: int) -> tuple[float, float, float]:
    """(median ms per turn, p95 ms, sustained ms per turn) for ``providers`` no-I/O providers."""
    with tempfile.TemporaryDirectory() as tmp:
        agent = make_agent(Path(tmp), providers)
        for _ in range(50):  # warm up: lanes, worker thread, caches
            agent.run_turn("warm up")
            agent.worker.flush(5)
        samples = []
        for i in range(turns):
            # a fresh history every 100 turns keeps the history copy per call from growing
            if i % 100 == 0:
                agent.history.clear()
            start = time.perf_counter()
            agent.run_turn("what did we decide about the depot indexes?")
            samples.append((time.perf_counter() - start) * 1000)
            agent.worker.flush(5)
        agent.history.clear()
        start = time.perf_counter()
        for i in range(turns):
            if i % 100 == 0:
                agent.history.clear()
            agent.run_turn("what did we decide about the depot indexes?")
        agent.worker.flush(30)
        sustained = (time.perf_counter() - start) * 1000 / turns
        agent.close()
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)], sustained


class DelegationScript:
    """The model's words for the delegation bench, answered at once (the only fake)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def respond(self, *, system: str, messages: Any, max_tokens: int, model: str | None = None,
                timeout: float | None = None, tools: Any = None, on_text: Any = None) -> LLMResponse:
        usage = Usage(input_tokens=100, output_tokens=10)
        if system.startswith("You are a subagent"):
            return LLMResponse(text="the child's answer", usage=usage, stop_reason="end_turn")
        last = messages[-1]
        if last.role == "user":
            args = {"tasks": [{"task": "look into it"}]} if self.tool == "delegate_task" else {}
            return LLMResponse(text="", usage=usage, stop_reason="tool_use",
                               tool_calls=[ToolCall(id="c1", name=self.tool, arguments=args)])
        if self.tool == "work" and last.role == "tool" and len(messages) < 5:
            # inline: the call the child would have made, then the tool loop goes on
            return LLMResponse(text="", usage=usage, stop_reason="tool_use",
                               tool_calls=[ToolCall(id="c2", name="work", arguments={})])
        return LLMResponse(text="done", usage=usage, stop_reason="end_turn")

    def complete(self, **kwargs: Any) -> str:
        return ""


def delegation_agent(home: Path, tool: str) -> Agent:
    from hermes_core.plugins.tools import delegate

    class Reg:
        @hookimpl
        def register_memory_providers(self, register):
            register(type("Q0", (Quiet,), {"name": "q0"}))

        @hookimpl
        def register_context_engines(self, register):
            register(Never)

        @hookimpl
        def register_tools(self, register):
            register(Tool(name="work", description="no-op", handler=lambda args, ctx: "ok",
                          parameters={"type": "object", "properties": {}}))

    config = parse_config_text("memory:\n  providers: [q0]\ncontext:\n  engine: bench_engine\n",
                               home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("bench", Reg()), ("delegate", delegate)])
    return Agent.create(host, DelegationScript(tool))  # type: ignore[arg-type]


def delegation_overhead(turns: int) -> tuple[float, float]:
    """(median ms of a turn delegating one task, median ms of the same calls inline), A B A B."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        delegated = delegation_agent(Path(tmp) / "a", "delegate_task")
        inline = delegation_agent(Path(tmp) / "b", "work")
        times: dict[str, list[float]] = {"delegated": [], "inline": []}
        for i in range(turns + 20):
            for label, agent in (("delegated", delegated), ("inline", inline)):
                if i % 50 == 0:
                    agent.history.clear()
                start = time.perf_counter()
                result = agent.run_turn("please look into it")
                elapsed = (time.perf_counter() - start) * 1000
                assert result.reply == "done", result.reply
                agent.worker.flush(5)
                if i >= 20:  # warm-up turns are not counted
                    times[label].append(elapsed)
        delegated.close()
        inline.close()
    return statistics.median(times["delegated"]), statistics.median(times["inline"])


def replay_speed(runs: int) -> tuple[float, int, int]:
    """(median turns/s, turns, compactions) replaying the long example with the built-in stack."""
    from hermes_core.replay import build_host, load_transcript, replay

    transcript = load_transcript(ROOT / "examples" / "long-incident.jsonl")
    rates, compactions = [], 0
    logging.getLogger("hermes_core").setLevel(logging.ERROR)  # the compaction notice is expected
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            host = build_host(load_config(home), home)
            report = replay(transcript, host)
            rates.append(report.summary["turns"] / report.summary["seconds"])
            compactions = report.summary["compactions"]
    return statistics.median(rates), len(transcript.turns), compactions


def openai_layer_overhead(calls: int) -> dict[str, float]:
    """Medians (ms) of the openai client against direct SDK calls, A B A B on one server."""
    import logging as _logging

    import openai

    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.llm.openai import OpenAIClient, OpenAIConfig
    from hermes_core.plugins.llm.openai.convert import from_completion, to_chat_messages
    from hermes_core.testing import OpenAIAPIServer, Reply
    from hermes_core.types import Message

    history: list[Message] = []
    for i in range(5):
        history += [Message("user", f"question {i} " * 20),
                    Message("assistant", "", tool_calls=[ToolCall(f"c{i}", "note", {"text": "x" * 80})]),
                    Message("tool", '{"saved": "' + "x" * 80 + '"}', tool_call_id=f"c{i}"),
                    Message("assistant", f"answer {i} " * 20)]
    answer = Reply(text="a short answer of a few words", chunk_size=8,
                   usage={"prompt_tokens": 900, "completion_tokens": 8})
    times: dict[str, list[float]] = {"sdk": [], "client": [], "sdk_first": [], "client_first": []}
    with tempfile.TemporaryDirectory() as tmp, OpenAIAPIServer(default=answer) as api:
        core = parse_config_text("llm:\n  client: openai\n  model: gpt-test\n",
                                 Path(tmp) / "config.yaml").core
        context = PluginContext(plugin_name="openai", home=Path(tmp), config=core,
                                logger=_logging.getLogger("bench"))
        client = OpenAIClient(OpenAIConfig(base_url=api.base_url, api_key_env=None), context)
        sdk = openai.OpenAI(api_key="no-key", base_url=api.base_url, max_retries=2, timeout=600.0)
        body = {"model": "gpt-test", "messages": to_chat_messages("system prompt", history),
                "max_tokens": 100}

        def direct() -> None:
            sdk.chat.completions.create(**body)

        def layered() -> None:
            client.respond(system="system prompt", messages=history, max_tokens=100)

        def direct_first() -> float:
            start = time.perf_counter()
            with sdk.chat.completions.create(**body, stream=True,
                                             stream_options={"include_usage": True}) as stream:
                first = 0.0
                for chunk in stream:
                    if not first and chunk.choices and chunk.choices[0].delta.content:
                        first = time.perf_counter() - start
            return first

        def layered_first() -> float:
            start, first = time.perf_counter(), [0.0]

            def seen(_delta: str) -> None:
                if not first[0]:
                    first[0] = time.perf_counter() - start
            client.respond(system="system prompt", messages=history, max_tokens=100, on_text=seen)
            return first[0]

        for _ in range(20):  # warm up: connections, imports
            direct(), layered(), direct_first(), layered_first()
        order = [("sdk", direct), ("client", layered)]
        firsts = [("sdk_first", direct_first), ("client_first", layered_first)]
        for i in range(calls):
            flip = -1 if i % 2 else 1  # A B, then B A: neither side always goes second
            for name, fn in order[::flip]:
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) * 1000)
            for name, first_fn in firsts[::flip]:
                times[name].append(first_fn() * 1000)
        # the layer's own work, without the network: conversion there and back, per call
        completion = sdk.chat.completions.create(**body)
        start = time.perf_counter()
        for _ in range(calls):
            client.build_request(system="system prompt", messages=history, max_tokens=100)
            from_completion(completion)
        work = (time.perf_counter() - start) * 1000 / calls
        client.close()
    pairs = zip(times["client"], times["sdk"], strict=True)
    firsts = zip(times["client_first"], times["sdk_first"], strict=True)
    return {**{k: statistics.median(v) for k, v in times.items()},
            "layer": statistics.median(b - a for b, a in pairs), "work": work,
            "first_added": statistics.median(b - a for b, a in firsts)}


def report(label: str, value: float, unit: str, target: float | None = None) -> None:
    ratio = f"  ratio to target {value / target:.2f} (target < {target:g} {unit})" if target else ""
    print(f"{label:<58} {value:9.3f} {unit}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.turns} turns per figure (medians), {args.runs} replay runs")
    for n in (0, 1, 10):
        median, p95, sustained = turn_overhead(n, args.turns)
        target = TARGET_OVERHEAD_MS if n == 10 else None
        report(f"kernel overhead per turn, {n:2d} providers (median)", median, "ms", target)
        report("  p95", p95, "ms")
        report("  sustained, worker running alongside (mean)", sustained, "ms")
    with_child, inline = delegation_overhead(max(50, args.turns // 10))
    report("turn delegating 1 task, 3 scripted calls (median)", with_child, "ms")
    report("same 3 scripted calls inline (median)", inline, "ms")
    report("  delegation overhead per child", with_child - inline, "ms", TARGET_DELEGATION_MS)
    layer = openai_layer_overhead(max(100, args.turns // 4))
    report("openai: direct SDK call, 20-message history (median)", layer["sdk"], "ms")
    report("openai: same call through OpenAIClient.respond (median)", layer["client"], "ms")
    report("  openai client layer per call (median of A B pairs)", layer["layer"], "ms",
           TARGET_LAYER_MS)
    report("  the layer's own work per call, in process (mean)", layer["work"], "ms",
           TARGET_LAYER_MS)
    report("openai: first streamed token, direct SDK (median)", layer["sdk_first"], "ms")
    report("openai: first streamed token, OpenAIClient (median)", layer["client_first"], "ms")
    report("  time to first token added by the layer (median of pairs)", layer["first_added"],
           "ms", TARGET_FIRST_TOKEN_MS)
    rate, turns, compactions = replay_speed(args.runs)
    report(f"replay examples/long-incident.jsonl ({turns} turns, {compactions} compaction)",
           rate, "turns/s")


if __name__ == "__main__":
    main()
