"""Derived memory (session_archive.derive): model tokens per turn, facts per turn, bytes per fact.

A scripted model (the loopback Messages API server of hermes_core.testing; only its words are
fake) answers every derivation call with one fact per user message, citing the prompt's ids,
through the real anthropic client and the real archive on the host's background lane. It prints:

* input and output tokens per turn, as the loopback server counts them (characters / 4 of the
  request's system prompt and messages, and of the answer: a rough count, not a vendor's
  tokenizer), and the prompt's characters per turn (exact);
* facts stored per turn and bytes per fact in state.db (the facts tables' pages / facts);
* the turn's own cost: the time to store a turn's two messages with derivation on against off,
  side by side (A B A B, after a warm-up run), medians and their ratio (the turn never calls
  the model; each derivation waits until turns pause, as background embedding does).

The effect of the facts on recall is not measured here: that needs a real model.

    python bench/bench_derive.py [--turns 200]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import hermes_core.plugins.llm.anthropic as anthropic_plugin
import hermes_core.plugins.memory.session_archive as plugin
from hermes_core.config import parse_config_text
from hermes_core.embeddings import turn_in_flight
from hermes_core.host import PluginHost
from hermes_core.plugins.memory.session_archive.facts import derivation_state
from hermes_core.testing import MessagesAPIServer, Reply
from hermes_core.types import Message, Session, SwitchReason

_LINE = re.compile(r"^\[(\d+)\] user: (.*)$", re.M)
SENTENCES = [
    "I moved the team to Lisbon last month and we are still finding an office",
    "Can you suggest a dinner place? Nothing spicy, my stomach can't take it",
    "We decided to ship the billing rewrite before the summer freeze",
    "My daughter started violin lessons, so Tuesdays are out for meetings",
    "I switched from vim to Helix for the Rust work, the defaults are nicer",
    "Our standup moved to 9:30 because half the team is in Toronto now",
]


def scripted(body: dict[str, Any]) -> Reply:
    content = body["messages"][0]["content"]
    prompt = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    facts = [{"kind": "state", "topic": f"topic {mid}", "text": f"The user said: {text[:120]}",
              "sources": [int(mid)]} for mid, text in _LINE.findall(prompt)]
    return Reply(text=json.dumps({"facts": facts}))


def host_for(home: Path, api: MessagesAPIServer, derive: bool) -> PluginHost:
    config = parse_config_text(
        "memory:\n  providers: [session_archive]\nembeddings:\n  embedder: none\n"
        f"llm:\n  api_key: k\n  base_url: {api.base_url}\n  max_retries: 0\n"
        f"session_archive:\n  derive: {'true' if derive else 'false'}\n", home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("session_archive", plugin),
                                                       ("anthropic", anthropic_plugin)])
    host.activate_memory_providers()
    return host


def run(home: Path, api: MessagesAPIServer, derive: bool, turns: int) -> tuple[list[float], Any]:
    home.mkdir(parents=True, exist_ok=True)
    host = host_for(home, api, derive)
    (provider,) = host.instances.values()
    session = Session(id="bench")
    host.hooks.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    times = []
    for i in range(turns):
        text = SENTENCES[i % len(SENTENCES)]
        with turn_in_flight():  # as the agent marks its turns
            start = time.perf_counter()
            host.hooks.on_message(message=Message("user", text), session=session)
            host.hooks.on_message(message=Message("assistant", "Noted, thanks."),
                                  session=session)
            times.append((time.perf_counter() - start) * 1000)
    if provider.deriver is not None:
        provider.deriver.wait_idle(600)
    state = derivation_state(provider.archive) if derive else None
    host.shutdown()
    return times, state


def fact_bytes(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(db)
    try:
        pages = con.execute("SELECT sum(pgsize) FROM dbstat WHERE name IN ('facts', "
                            "'fact_sources', 'facts_user', 'facts_session', "
                            "'fact_sources_message')").fetchone()[0]
        n = con.execute("SELECT count(*) FROM facts").fetchone()[0]
    except sqlite3.OperationalError:  # no dbstat in this SQLite build
        return 0, 0
    finally:
        con.close()
    return int(pages or 0), int(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MessagesAPIServer(scripted) as api:
        on: list[float] = []
        off: list[float] = []
        state = None
        # warm-up, not counted: the first derivation imports the client's SDK on the lane
        run(Path(tmp) / "warm", api, True, 10)
        api.requests.clear()
        for rnd in range(2):  # A B A B
            t_on, state = run(Path(tmp) / f"on{rnd}", api, True, args.turns)
            t_off, _ = run(Path(tmp) / f"off{rnd}", api, False, args.turns)
            on += t_on
            off += t_off
        assert state is not None
        prompts = [len(json.dumps(b["messages"])) + len(json.dumps(b.get("system", "")))
                   for b in api.bodies]
        size, facts = fact_bytes(Path(tmp) / "on1" / "state.db")
    print(f"derived memory, {args.turns} turns x 2 runs (scripted model, loopback server)")
    print(f"  model tokens per turn: {state.input_tokens / state.turns:.0f} input + "
          f"{state.output_tokens / state.turns:.0f} output = {state.tokens_per_turn():.0f} "
          "(loopback count: characters / 4)")
    print(f"  prompt characters per turn: median {statistics.median(prompts):.0f}, "
          f"max {max(prompts)}")
    print(f"  facts per turn: {state.facts / state.turns:.2f}; backlog {state.backlog}; "
          f"last problem: {state.error}")
    if facts:
        print(f"  bytes per fact in state.db (tables and indexes): {size / facts:.0f}")
    mon, moff = statistics.median(on), statistics.median(off)
    print(f"  storing a turn's two messages: median {mon:.2f} ms with derivation on, "
          f"{moff:.2f} ms off (ratio {mon / moff:.2f}; target: the turn does not wait, ~1.0)")
    print("  effect on recall: not measured here (no real model reachable)")


if __name__ == "__main__":
    main()
