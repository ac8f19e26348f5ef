"""Agent-loop benchmarks: kernel overhead per turn, and replay speed on the long example.

Prints medians and their ratio to the targets of issue 6 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_agent.py [--turns 2000] [--runs 5]
    python bench/bench_agent.py --only-review 24    # the memory review's share, on against off

* **Kernel overhead per turn**: ``Agent.run_turn`` with N memory providers that do no I/O
  (``system_prompt_block``, ``on_message``, ``prefetch``, ``sync_turn``, ``queue_prefetch``), a
  context engine that never compacts, and a stub LLM that answers at once. What is timed is the
  kernel: archiving fan-out, prefetch on the providers' lanes under the deadline, fencing, the
  engine's hooks, queuing the turn's sync on the worker. The worker's own run of ``sync_turn`` /
  ``queue_prefetch`` happens off the turn; it is flushed between turns, outside the timing, and
  reported separately as the sustained figure (turns back to back, worker competing for the GIL).
  ``--only-review PAIRS`` measures the memory review's share of it: the same agent with the review
  on and off (``plugins.disabled``), alternated in one process, wall and process CPU time.
* **Delegation**: one turn that delegates one task (parent call, child's call, parent's answer)
  against the same three scripted model calls run inline (a no-op tool in place of
  ``delegate_task``), alternated A B A B; the difference is the per-child overhead (child host,
  its engine instance, child session, thread, ``on_delegation``). Target <= 5 ms per child.
* **Replay**: ``hermes-core replay examples/long-incident.jsonl`` through the library with the
  built-in stack (file memory, compressor), in a fresh scratch home per run; turns per second.
* **Model client layer** (per client, :func:`client_layer`): one call through the client
  (``respond``: the kernel's messages converted, the SDK called, the answer mapped back) against
  the same request sent with the SDK directly, both to the client's loopback server, alternated
  A B A B; the difference of the medians is the layer's cost per call (target <= 0.5 ms). The
  same for streaming: time to the first text delta through ``respond(on_text=...)`` against the
  SDK's own stream (target <= 1 ms added). A client is described by a :class:`LayerCase`.
* **Context editing** (:func:`editing_tokens`, ``--only-editing``): a 100-turn tool-heavy
  conversation (each turn: the model fetches a ~1,000-token page, then answers) through the
  agent loop, the real anthropic SDK and the loopback Messages API, once with
  ``compression.platform`` sending ``clear_tool_uses_20250919`` and once without. Tokens per turn
  are the input tokens the server reports reading, which the loopback server computes with its
  *model* of the clearing rule (``hermes_core.testing.context_model``), not the platform's own
  accounting. The local compressor is kept out of it (a window of 1,000,000 tokens).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_core import ContextEngine, MemoryProvider, PluginHost, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import load_config, parse_config_text
from hermes_core.llm import LLMResponse
from hermes_core.testing import CannedLLM
from hermes_core.types import Message, ToolCall, Usage

ROOT = Path(__file__).resolve().parents[1]
TARGET_OVERHEAD_MS = 1.0  # with 10 providers
TARGET_LAYER_MS = 0.5  # the model client layer, per call
TARGET_FIRST_TOKEN_MS = 1.0  # added to the time to the first streamed token
TARGET_DELEGATION_MS = 5.0  # per child, the model excluded


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


def make_agent(home: Path, providers: int, *, review: bool = True) -> Agent:
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
    off = "" if review else "plugins:\n  disabled: [memory_review]\n"
    config = parse_config_text(f"memory:\n  providers: [{names}]\ncontext:\n  engine: bench_engine\n"
                               + off, home / "config.yaml")
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


@dataclass
class LayerCase:
    """One model client to measure against its SDK, both talking to one loopback server.

    ``server()`` starts the server (a context manager with ``base_url``); ``layer(base_url)``
    builds the client; ``direct(base_url)`` returns ``(call, stream)``: ``call()`` sends the
    same request with the SDK directly, ``stream(on_text)`` streams it, calling ``on_text`` with
    each text delta. ``history`` is the conversation sent (kernel messages)."""

    name: str
    server: Callable[[], Any]
    layer: Callable[[str], Any]
    direct: Callable[[str], tuple[Callable[[], Any], Callable[[Callable[[str], None]], Any]]]
    history: list[Message]
    #: ``own_work(base_url)`` returns a function doing the layer's own work of one call without
    #: the network (converting the request, mapping a recorded answer back); optional
    own_work: Callable[[str], Callable[[], Any]] | None = None


def _first_delta_ms(stream: Callable[[Callable[[str], None]], Any]) -> float:
    """Milliseconds from the call to its first text delta (the call then runs to its end)."""
    first: list[float] = []
    start = time.perf_counter()
    stream(lambda _delta: first.append(time.perf_counter()) if not first else None)
    return (first[0] - start) * 1000 if first else float("nan")


def client_layer(case: LayerCase, calls: int) -> dict[str, float]:
    """Medians (ms) of one call and of the time to the first streamed delta, through the client
    and with the SDK directly, alternated A B A B after 20 warm-up rounds; ``*_diff`` are the
    medians of the paired differences (each A minus the B next to it), steadier on a busy
    machine than the difference of the medians; ``own`` the layer's own work without the
    network (when the case gives it)."""
    times: dict[str, list[float]] = {"layer": [], "direct": [], "layer_ttft": [], "direct_ttft": [],
                                     "diff": [], "ttft_diff": [], "own": []}
    with case.server() as server:
        client = case.layer(server.base_url)
        call, stream = case.direct(server.base_url)
        send = functools.partial(client.respond, system="You are terse.", messages=case.history,
                                 max_tokens=64)
        for i in range(calls + 20):
            pair = []
            for label, fn in (("layer", send), ("direct", call)) if i % 2 else (
                    ("direct", call), ("layer", send)):
                start = time.perf_counter()
                fn()
                pair.append((label, (time.perf_counter() - start) * 1000))
            if i % 2:
                layer_ttft = _first_delta_ms(lambda on_text: send(on_text=on_text))
                direct_ttft = _first_delta_ms(stream)
            else:
                direct_ttft = _first_delta_ms(stream)
                layer_ttft = _first_delta_ms(lambda on_text: send(on_text=on_text))
            if i >= 20:
                took = dict(pair)
                for label, ms in took.items():
                    times[label].append(ms)
                times["diff"].append(took["layer"] - took["direct"])
                times["layer_ttft"].append(layer_ttft)
                times["direct_ttft"].append(direct_ttft)
                times["ttft_diff"].append(layer_ttft - direct_ttft)
        if case.own_work is not None:
            work = case.own_work(server.base_url)
            for i in range(calls * 10 + 100):
                start = time.perf_counter()
                work()
                if i >= 100:
                    times["own"].append((time.perf_counter() - start) * 1000)
        client.close()
    return {k: statistics.median(v) if v else float("nan") for k, v in times.items()}


def anthropic_case() -> LayerCase:
    """The ``anthropic`` client and the anthropic SDK against the loopback Messages API."""
    import anthropic

    from hermes_core.plugins.llm.anthropic import AnthropicClient
    from hermes_core.testing import MessagesAPIServer

    history = [Message("user", "What did we decide about the deploy?"),
               Message("assistant", "To ship on Tuesday after the migration."),
               Message("user", "And the rollback plan?")]
    answer = "Roll back with the previous image; the migration is reversible."

    def layer(url: str) -> AnthropicClient:
        return AnthropicClient(api_key="k", base_url=url, model="claude-test", max_retries=0)

    def direct(url: str) -> tuple[Callable[[], Any], Callable[[Callable[[str], None]], Any]]:
        sdk = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        request = layer(url).build_request(system="You are terse.", messages=history,
                                           max_tokens=64)

        def stream(on_text: Callable[[str], None]) -> Any:
            with sdk.messages.stream(**request) as events:
                for delta in events.text_stream:
                    on_text(delta)
                return events.get_final_message()

        return (lambda: sdk.messages.create(**request)), stream

    def own_work(url: str) -> Callable[[], Any]:
        from hermes_core.plugins.llm.anthropic.client import to_response

        client = layer(url)
        sdk = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0)
        recorded = sdk.messages.create(**client.build_request(
            system="You are terse.", messages=history, max_tokens=64))

        def work() -> Any:
            client.build_request(system="You are terse.", messages=history, max_tokens=64)
            return to_response(recorded)

        return work

    return LayerCase("anthropic", lambda: MessagesAPIServer(lambda body: answer), layer, direct,
                     history, own_work)


def openai_case() -> LayerCase:
    """The ``openai`` client and the openai SDK against the loopback OpenAI-compatible server,
    on a 20-message history with tool calls (so the conversion has work to do)."""
    import openai

    from hermes_core.kinds import PluginContext
    from hermes_core.plugins.llm.openai import OpenAIClient, OpenAIConfig
    from hermes_core.plugins.llm.openai.convert import from_completion
    from hermes_core.testing import OpenAIAPIServer, Reply

    history: list[Message] = []
    for i in range(5):
        history += [Message("user", f"question {i} " * 20),
                    Message("assistant", "", tool_calls=[ToolCall(f"c{i}", "note", {"text": "x" * 80})]),
                    Message("tool", '{"saved": "' + "x" * 80 + '"}', tool_call_id=f"c{i}"),
                    Message("assistant", f"answer {i} " * 20)]
    answer = Reply(text="Roll back with the previous image; the migration is reversible.",
                   chunk_size=8, usage={"prompt_tokens": 900, "completion_tokens": 14})
    home = Path(tempfile.mkdtemp(prefix="bench-openai-"))
    core = parse_config_text("llm:\n  client: openai\n  model: gpt-test\n  max_retries: 0\n",
                             home / "config.yaml").core

    def layer(url: str) -> OpenAIClient:
        context = PluginContext(plugin_name="openai", home=home, config=core,
                                logger=logging.getLogger("bench"))
        return OpenAIClient(OpenAIConfig(base_url=url, api_key_env=None), context)

    def direct(url: str) -> tuple[Callable[[], Any], Callable[[Callable[[str], None]], Any]]:
        sdk = openai.OpenAI(api_key="no-key", base_url=url, max_retries=0)
        request = layer(url).build_request(system="You are terse.", messages=history,
                                           max_tokens=64)

        def stream(on_text: Callable[[str], None]) -> Any:
            with sdk.chat.completions.create(**request, stream=True,
                                             stream_options={"include_usage": True}) as chunks:
                for chunk in chunks:
                    if chunk.choices and chunk.choices[0].delta.content:
                        on_text(chunk.choices[0].delta.content)

        return (lambda: sdk.chat.completions.create(**request)), stream

    def own_work(url: str) -> Callable[[], Any]:
        client = layer(url)
        sdk = openai.OpenAI(api_key="no-key", base_url=url, max_retries=0)
        recorded = sdk.chat.completions.create(**client.build_request(
            system="You are terse.", messages=history, max_tokens=64))

        def work() -> Any:
            client.build_request(system="You are terse.", messages=history, max_tokens=64)
            return from_completion(recorded)

        return work

    return LayerCase("openai", lambda: OpenAIAPIServer(default=answer), layer, direct, history,
                     own_work)


def report_layer(case: LayerCase, calls: int) -> None:
    m = client_layer(case, calls)
    report(f"{case.name}: one call through the client (median)", m["layer"], "ms")
    report(f"{case.name}: the same request, SDK directly (median)", m["direct"], "ms")
    report(f"  {case.name} client layer per call (median of A-B pairs)", m["diff"], "ms",
           TARGET_LAYER_MS)
    if m["own"] == m["own"]:  # measured
        report(f"  {case.name} layer's own work, no network (median)", m["own"], "ms",
               TARGET_LAYER_MS)
    report(f"{case.name}: first streamed token, through the client", m["layer_ttft"], "ms")
    report(f"{case.name}: first streamed token, SDK directly", m["direct_ttft"], "ms")
    report(f"  {case.name} added to the first token (median of A-B pairs)", m["ttft_diff"], "ms",
           TARGET_FIRST_TOKEN_MS)


_EDITING = ("  platform:\n    features: [clear_tool_uses_20250919]\n"
            "    clear_trigger_tokens: 30000\n    keep_tool_uses: 3\n")


class _Pages:
    @hookimpl
    def register_tools(self, register: Callable[[Tool], None]) -> None:
        def fetch(args: dict[str, Any], context: Any) -> str:
            return f"page {args.get('page')}: " + "build log line, nothing failed. " * 125

        register(Tool(name="fetch", description="Fetch a page of the build log.", handler=fetch,
                      parameters={"type": "object", "properties": {"page": {"type": "string"}}}))


def _page_model(body: dict[str, Any]) -> Any:
    from hermes_core.testing import Reply

    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return Reply(text="Read it; nothing failed on that page.")
    return Reply(tool_calls=[{"name": "fetch", "input": {"page": str(len(body["messages"]))}}])


def editing_tokens(turns: int, editing: bool) -> tuple[list[int], int]:
    """``(input tokens the server read per turn, request bytes of the last call)``."""
    from hermes_core.testing import MessagesAPIServer, make_host

    with tempfile.TemporaryDirectory() as tmp, MessagesAPIServer(_page_model) as api:
        text = ("memory:\n  providers: []\ncontext:\n  engine: compressor\n"
                f"llm:\n  base_url: {api.base_url}\n  api_key: bench\n  model: claude-test\n"
                "  context_window: 1000000\n  max_retries: 0\ncompression:\n"
                + (_EDITING if editing else "  enabled: true\n"))
        host = make_host(Path(tmp), plugins=[("pages", _Pages())], config=text)
        agent = Agent.create(host)
        per_turn = [sum(u.input_tokens for u in agent.run_turn(f"read page {n}").usage)
                    for n in range(turns)]
        agent.close()
        last = api.requests[-1]
        return per_turn, len(json.dumps(last.body))


def review_cost(providers: int, turns: int, pairs: int) -> list[tuple[str, float, float, float]]:
    """The memory review's share of a turn: two agents in one process, the review on (B) and off
    (C, ``plugins.disabled: [memory_review]``), blocks of ``turns`` turns alternated B C / C B
    ``pairs`` times, sustained (turns back to back) and flushed (the worker drained after each).
    Per mode: (mode, median wall ms per turn of B / of C, median of the pairs' B/C wall ratios,
    median of their B/C process-CPU ratios: CPU time is what a busy machine inflates least)."""
    with tempfile.TemporaryDirectory() as on, tempfile.TemporaryDirectory() as off:
        agents = {True: make_agent(Path(on), providers), False: make_agent(Path(off), providers,
                                                                           review=False)}
        for agent in agents.values():
            for _ in range(50):
                agent.run_turn("warm up")
                agent.worker.flush(5)

        def block(agent: Agent, sustained: bool) -> tuple[float, float]:
            agent.history.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(turns):
                if i % 100 == 0:
                    agent.history.clear()
                agent.run_turn("what did we decide about the depot indexes?")
                if not sustained:
                    agent.worker.flush(5)
            agent.worker.flush(30)
            return ((time.perf_counter() - wall) * 1000 / turns,
                    (time.process_time() - cpu) * 1000 / turns)

        out = []
        for mode, sustained in (("sustained", True), ("flushed", False)):
            b_walls, c_walls, wall_ratios, cpu_ratios = [], [], [], []
            for k in range(pairs):
                order = (True, False) if k % 2 == 0 else (False, True)
                got = {review: block(agents[review], sustained) for review in order}
                b_walls.append(got[True][0])
                c_walls.append(got[False][0])
                wall_ratios.append(got[True][0] / got[False][0])
                cpu_ratios.append(got[True][1] / got[False][1])
            out.append((mode, statistics.median(b_walls), statistics.median(c_walls),
                        statistics.median(wall_ratios), statistics.median(cpu_ratios)))
        for agent in agents.values():
            agent.close()
    return out


def report_review(pairs: int) -> None:
    print(f"memory review on (B) / off (C), 10 providers, {pairs} pairs of 300-turn blocks, "
          f"load {os.getloadavg()[0]:.1f}")
    for mode, b, c, wall, cpu in review_cost(10, 300, pairs):
        report(f"  {mode}: ms per turn, B / C (medians)", b, f"/ {c:.3f} ms")
        report(f"  {mode}: B/C, wall (median of pair ratios)", wall, "")
        report(f"  {mode}: B/C, process CPU (median of pair ratios)", cpu, "")


def report_editing(turns: int) -> None:
    off, off_bytes = editing_tokens(turns, editing=False)
    on, on_bytes = editing_tokens(turns, editing=True)
    report(f"context editing off: input tokens per turn, mean of {turns}", statistics.mean(off), "tok")
    report(f"context editing on:  input tokens per turn, mean of {turns}", statistics.mean(on), "tok")
    report("  last turn, off", off[-1], "tok")
    report("  last turn, on", on[-1], "tok")
    report("  ratio on/off, all turns (tokens the server read)", sum(on) / sum(off), "")
    report("  request bytes of the last call, off / on (the kernel sends all)",
           off_bytes / max(1, on_bytes), "")


def report(label: str, value: float, unit: str, target: float | None = None) -> None:
    ratio = f"  ratio to target {value / target:.2f} (target < {target:g} {unit})" if target else ""
    print(f"{label:<58} {value:9.3f} {unit}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300, help="model client layer: calls per side")
    parser.add_argument("--only-clients", action="store_true", help="measure only the client layer")
    parser.add_argument("--only-editing", action="store_true",
                        help="measure only context editing's tokens per turn")
    parser.add_argument("--editing-turns", type=int, default=100)
    parser.add_argument("--only-review", type=int, metavar="PAIRS", default=0,
                        help="measure only the memory review's share of a turn (on against off, "
                        "alternated in one process, PAIRS pairs)")
    args = parser.parse_args()
    if args.only_review:
        report_review(args.only_review)
        return
    report_editing(args.editing_turns)
    if args.only_editing:
        return
    for case in (anthropic_case(), openai_case()):
        report_layer(case, args.calls)
    if args.only_clients:
        return
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
    rate, turns, compactions = replay_speed(args.runs)
    report(f"replay examples/long-incident.jsonl ({turns} turns, {compactions} compaction)",
           rate, "turns/s")


if __name__ == "__main__":
    main()
