"""A provider that sleeps 5 s in on_message, system_prompt_block, prefetch and sync_turn, beside the
built-in archive: how long ``examples/first-week.jsonl`` (6 turns) takes to replay, against the
30-second target of the kernel contract, and whether the archive still holds every message.

    python bench/bench_slow_plugin.py [--sleep 5]

Prints figures; asserts nothing (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from hermes_core import MemoryProvider, hookimpl
from hermes_core.config import load_config
from hermes_core.replay import build_host, load_transcript, replay

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 30.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sleep", type=float, default=5.0)
    args = parser.parse_args()
    stop = threading.Event()
    nap = args.sleep

    class Sleepy(MemoryProvider):
        name = "sleepy"

        @hookimpl
        def on_message(self, message):
            stop.wait(nap)

        @hookimpl
        def system_prompt_block(self, session):
            stop.wait(nap)
            return "a block that comes too late"

        @hookimpl
        def prefetch(self, query):
            stop.wait(nap)

        @hookimpl
        def sync_turn(self):
            stop.wait(nap)

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register):
            register(Sleepy)

    transcript = load_transcript(ROOT / "examples" / "first-week.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.yaml").write_text("memory:\n  providers: [sleepy, session_archive]\n")
        host = build_host(load_config(home), home)
        host.register_plugin("sleepy_plugin", Registrar())
        start = time.perf_counter()
        report = replay(transcript, host)
        seconds = time.perf_counter() - start
        stop.set()
        with sqlite3.connect(home / "state.db") as db:
            stored = db.execute("SELECT count(*) FROM messages WHERE role = 'user'").fetchone()[0]
    s = report.summary
    print(f"replay of {len(transcript.turns)} turns with a provider sleeping {nap:g} s in 4 hooks: "
          f"{seconds:.1f} s  ratio to target {seconds / TARGET_S:.2f} (target < {TARGET_S:g} s)")
    print(f"  user messages archived: {stored} of {len(transcript.turns)}; hook problems recorded: "
          f"{s['hook_problems']} ({s['hooks_timed_out']} late or queued); drain: "
          f"{s['worker_drain']['status']}")


if __name__ == "__main__":
    main()
