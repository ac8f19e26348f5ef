"""``hermes-core import hermes`` rate (messages/s) on a Hermes Agent state.db of 100k messages.

The source home is written by hermes-agent's own ``SessionDB`` (``pip install
hermes-agent==0.19.0``; the ``hermes-agent`` tox env has it): sessions of 100 messages
(user/assistant turns, one in ten with a tool call and its result; chains of ten sessions
linked by compaction), through ``replace_messages``, one transaction per session, as Hermes'
own bulk path does.
Building it is timed too: Hermes' own bulk write rate on this machine is the reference figure.

Then, alternating (A B A B ...), each into a fresh hermes-core home:

* A: ``hermes-core import hermes HOME --json`` (read state.db, convert, store through the
  archive's import path; a subprocess, start-up included);
* B: ``hermes-core sessions import FILE --json`` of the same sessions in the archive's own export
  format (the archive's write path alone: what the conversion costs is A - B);

and a second ``import hermes`` into the first home (nothing to add: the idempotent re-run).
Medians over the rounds, each with its ratio (rate / reference; above 1.0: faster than the
reference). Nothing here asserts: the machine is shared.

    python bench/bench_hermes_import.py                      # 100k messages, 3 rounds
    python bench/bench_hermes_import.py --messages 20000 --rounds 2 --dir /tmp/hi-bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: user and assistant messages per session (plus 5 tool results)
PER_SESSION = 100


def build_hermes_home(home: Path, messages: int) -> tuple[int, float]:
    """Write a Hermes home with ``messages`` messages through hermes-agent's SessionDB; return the
    message count and the seconds its writes took."""
    try:
        from hermes_state import SessionDB
    except ImportError:
        sys.exit("needs hermes-agent in this environment: pip install hermes-agent==0.19.0")
    home.mkdir(parents=True, exist_ok=True)
    db = SessionDB(db_path=home / "state.db")
    sessions = max(1, messages // (PER_SESSION + 5))  # 5 tool results per session
    written = 0
    started = time.perf_counter()
    t = 1_700_000_000.0
    for s in range(sessions):
        sid = f"bench-{s:06d}"
        parent = f"bench-{s - 1:06d}" if s % 10 else None
        db.create_session(sid, "cli", model="bench-model", parent_session_id=parent)
        rows: list[dict[str, Any]] = []
        for n in range(PER_SESSION // 2):
            t += 1
            rows.append({"role": "user", "content": f"question {s}-{n} about topic{n % 97} "
                         f"and the word w{(s * 31 + n) % 5003}", "timestamp": t})
            if n % 10 == 3:
                rows.append({"role": "assistant", "content": "", "timestamp": t,
                             "tool_calls": [{"id": f"c{s}-{n}", "type": "function", "function": {
                                 "name": "terminal", "arguments": "{\"command\": \"ls\"}"}}]})
                rows.append({"role": "tool", "content": f"file{n}.txt", "timestamp": t,
                             "tool_call_id": f"c{s}-{n}", "tool_name": "terminal"})
            else:
                rows.append({"role": "assistant", "content": f"answer {s}-{n}: see section "
                             f"{n % 13} of the guide", "timestamp": t})
        db.replace_messages(sid, rows)
        written += len(rows)
        if s % 10 != 9:
            db.end_session(sid, "compression")  # the next session continues this one
    db.close()
    return written, time.perf_counter() - started


def run(home: Path, *args: str) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    env.pop("HERMES_CORE_STORAGE_URL", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hermes_core", *args, "--json"], env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"hermes-core {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)


def line(label: str, rate: float, reference: float, what: str) -> None:
    print(f"{label:<44} {rate:>10,.0f} msg/s  ratio {rate / reference:.2f} to {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="hermes-import-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        hermes = root / "hermes"
        shutil.rmtree(hermes, ignore_errors=True)
        n, build = build_hermes_home(hermes, args.messages)
        hermes_rate = n / build
        print(f"Hermes home: {n:,} messages in {n // (PER_SESSION + 5):,} sessions, written by "
              f"hermes-agent's SessionDB in {build:.1f} s ({hermes_rate:,.0f} msg/s)")
        export = root / "sessions.jsonl"
        a_times: list[float] = []
        b_times: list[float] = []
        rerun: list[float] = []
        for r in range(args.rounds):
            home_a, home_b = root / f"a{r}", root / f"b{r}"
            for home in (home_a, home_b):
                shutil.rmtree(home, ignore_errors=True)
            seconds, report = run(home_a, "import", "hermes", str(hermes))
            assert report["sessions"]["imported"]["messages"] == n, report["sessions"]
            a_times.append(seconds)
            if not export.exists():
                env = {**os.environ, "HERMES_CORE_HOME": str(home_a)}
                with open(export, "w", encoding="utf-8") as fh:
                    subprocess.run([sys.executable, "-m", "hermes_core", "sessions", "export",
                                    "--all"], env=env, stdout=fh, check=True)
            seconds, report_b = run(home_b, "sessions", "import", str(export))
            assert report_b["messages_imported"] == n, report_b
            b_times.append(seconds)
            seconds, again = run(home_a, "import", "hermes", str(hermes))
            assert again["sessions"]["imported"]["messages"] == 0, again["sessions"]
            rerun.append(seconds)
            print(f"round {r + 1}: import hermes {a_times[-1]:.1f} s, sessions import "
                  f"{b_times[-1]:.1f} s, import hermes again {rerun[-1]:.1f} s")
        a, b, again_s = (statistics.median(x) for x in (a_times, b_times, rerun))
        print(f"medians over {args.rounds} round(s), {n:,} messages, SQLite archive:")
        line("import hermes (A)", n / a, hermes_rate, "Hermes' own bulk write")
        line("sessions import of the same sessions (B)", n / b, hermes_rate,
             "Hermes' own bulk write")
        print(f"{'A / B (the cost of reading and converting)':<44} {a / b:>10.2f} x the time")
        line("import hermes again (nothing to add)", n / again_s, hermes_rate,
             "Hermes' own bulk write")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
