"""Benchmark: the compressor when the summary model fails (issue 17 item 7).

Two figures:

1. **Share of compacted user turns carried** by the extractive fallback (target 100 %): a user
   turn that left the context counts as carried when the start of its request (24 characters,
   whitespace squashed) is in the summary. Measured on ``examples/long-incident.jsonl`` (every
   turn of the transcript as one history, default settings and window) and on a longer generated
   incident session (400 user turns). The summary model answers HTTP 500 (loopback server).
2. **Worst-case seconds of one compaction** with ``summary_timeout: 5`` and the SDK's
   ``max_retries: 2``, for each failure mode the loopback Messages API server can script (the real
   anthropic SDK talks to it). Beside it, the same failing call made the old way (the timeout per
   attempt, the SDK retrying on its own), which is what a compaction cost before.

Run: ``python bench/bench_compressor_fallback.py [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_core.compaction.markers import is_summary_message
from hermes_core.config import CoreConfig, LLMSection
from hermes_core.kinds import PluginContext
from hermes_core.llm import LLMError
from hermes_core.plugins.context_engine.compressor import Compressor, CompressorConfig
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.replay import load_transcript
from hermes_core.testing import Broken, Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, ToolCall

ROOT = Path(__file__).resolve().parent.parent
TARGET_SHARE = 100.0
TIMEOUT = 5.0
#: the bound a compaction may take with summary_timeout 5: the call, plus the grace the engine
#: gives an injected LLM, plus the extractive summary itself
TARGET_SECONDS = TIMEOUT + 1.0


def context(home: Path, window: int | None = None) -> PluginContext:
    core = CoreConfig(llm=LLMSection(context_window=window, model="claude-sonnet-4-6"))
    return PluginContext(plugin_name="bench", home=home, config=core,
                         logger=logging.getLogger("bench"))


def transcript_history(path: Path) -> list[Message]:
    transcript = load_transcript(path)
    out: list[Message] = []
    for turn in transcript.turns:
        out.append(Message("user", turn.user))
        for response in turn.responses:
            out.append(Message("assistant", response.text, tool_calls=list(response.tool_calls)))
            for call in response.tool_calls:
                out.append(Message("tool", response.results.get(call.id, ""), tool_call_id=call.id,
                                   tool_name=call.name))
    return out


def generated_history(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out.append(Message("user", f"Turn {n:03d}: the depot {n % 17} routes look wrong again, "
                                   f"can you check shard {n % 5} and the planner logs?"))
        out.append(Message("assistant", "Checking the planner.", tool_calls=[
            ToolCall(f"c{n}", "read_file", {"path": f"router/planner/shard_{n % 5}.py"})]))
        body = "ok " * 400 if n % 7 else "Traceback ...\nTimeoutError: pool exhausted " * 20
        out.append(Message("tool", body, tool_call_id=f"c{n}", tool_name="read_file"))
        out.append(Message("assistant", f"We decided to pin shard {n % 5} to the new pool. "
                                        + "Details follow. " * 80))
    return out


def share(history: list[Message], window: int | None, home: Path) -> tuple[int, int, int, str]:
    with MessagesAPIServer(default=Failure(500)) as api:
        llm = AnthropicLLM(api_key="k", base_url=api.base_url, model="claude-sonnet-4-6",
                           max_retries=0)
        engine = Compressor(CompressorConfig(), context(home, window), llm=llm)
        result = engine.compact(history)
    kept = {id(m) for m in result.messages}
    summaries = [m for m in result.messages if is_summary_message(m)]
    text = " ".join(summaries[0].content.split()) if summaries else ""
    compacted = [m for m in history if m.role == "user" and id(m) not in kept]
    carried = sum(1 for m in compacted if " ".join(m.content.split())[:24] in text)
    verbatim = sum(1 for m in history if m.role == "user" and id(m) in kept)
    source = engine.last_report.source if engine.last_report else "?"
    return carried, len(compacted), verbatim, source


MODES: list[tuple[str, Any]] = [
    ("429 (retry-after 10 s)", Failure(429, retry_after_ms=10_000)),
    ("500", Failure(500, retry_after_ms=None)),
    ("529 (retry-after 10 s)", Failure(529, retry_after_ms=10_000)),
    ("401", Failure(401)),
    ("400", Failure(400, "prompt is too long")),
    ("empty answer", Reply()),
    ("malformed body", Broken("malformed")),
    ("connection reset", Broken("reset")),
    ("truncated body", Broken("truncated")),
    ("slow (20 s)", Reply(text="late", delay=20)),
    ("dead port", None),
]


def compaction_seconds(item: Any, history: list[Message], home: Path) -> tuple[float, str]:
    settings = CompressorConfig(prune_only_below=0, summary_timeout=TIMEOUT)
    if item is None:
        with MessagesAPIServer() as api:
            url = api.base_url
        llm = AnthropicLLM(api_key="k", base_url=url, model="m", max_retries=2)
        engine = Compressor(settings, context(home, 60_000), llm=llm)
        started = time.perf_counter()
        engine.compact(history)
        return time.perf_counter() - started, engine.last_report.source if engine.last_report else "?"
    with MessagesAPIServer(default=item) as api:
        llm = AnthropicLLM(api_key="k", base_url=api.base_url, model="m", max_retries=2)
        engine = Compressor(settings, context(home, 60_000), llm=llm)
        started = time.perf_counter()
        engine.compact(history)
        seconds = time.perf_counter() - started
    return seconds, engine.last_report.source if engine.last_report else "?"


def old_way_seconds(item: Any) -> float:
    """The failing call with the timeout per attempt and the SDK's own retries (as before)."""
    def call(url: str) -> float:
        llm = AnthropicLLM(api_key="k", base_url=url, model="m", max_retries=2, timeout=TIMEOUT)
        started = time.perf_counter()
        with contextlib.suppress(LLMError):
            llm.respond(system="s", messages=[Message("user", "summarise")], max_tokens=50)
        return time.perf_counter() - started

    if item is None:
        with MessagesAPIServer() as api:
            url = api.base_url
        return call(url)
    with MessagesAPIServer(default=item) as api:
        return call(api.base_url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip the old-way timings")
    args = parser.parse_args()
    logging.getLogger("hermes_core").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        print("share of compacted user turns carried by the extractive fallback (summary model: "
              "HTTP 500)")
        for label, history, window in (
            ("examples/long-incident.jsonl", transcript_history(ROOT / "examples" /
                                                                "long-incident.jsonl"), None),
            ("generated, 400 user turns", generated_history(400), None),
            ("generated, 400 user turns, 32k window", generated_history(400), 32_000),
        ):
            carried, compacted, verbatim, source = share(history, window, home)
            pct = 100.0 * carried / compacted if compacted else 100.0
            print(f"  {label:<40} {carried:>4}/{compacted:<4} carried = {pct:6.1f} % "
                  f"(target {TARGET_SHARE:.0f} %, ratio {pct / TARGET_SHARE:.2f}); "
                  f"{verbatim} user turns kept verbatim (head, tail, pins, over budget); source={source}")
        print(f"\none compaction when the summary model fails, summary_timeout={TIMEOUT:g} s, "
              "max_retries=2 (seconds)")
        print(f"  {'mode':<24} {'now':>7} {'ratio to bound':>15} {'old way':>9}")
        history = generated_history(60)
        worst = 0.0
        for label, item in MODES:
            seconds, source = compaction_seconds(item, history, home)
            worst = max(worst, seconds)
            old = "-" if args.quick else f"{old_way_seconds(item):>9.1f}"
            print(f"  {label:<24} {seconds:>7.2f} {seconds / TARGET_SECONDS:>15.2f} {old:>9}"
                  f"  ({source})")
        print(f"  worst case now: {worst:.2f} s per compaction (bound {TARGET_SECONDS:g} s = "
              f"summary_timeout + 1 s grace; ratio {worst / TARGET_SECONDS:.2f})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
