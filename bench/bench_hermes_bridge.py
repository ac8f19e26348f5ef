"""The Hermes bridge's costs: per-turn overhead against a native provider, and import/load time
with the bridge installed but no Hermes plugin selected.

Prints medians and their ratio to the targets of issue 32 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures. Needs the bridge
(plugins/hermes_compat) installed beside hermes-core.

    python bench/bench_hermes_bridge.py [--turns 1000] [--rounds 4]

* **Per-turn overhead**: one user turn (``Agent.run_turn`` with a stub LLM, then the worker's
  ``sync_turn`` / ``queue_prefetch`` flushed) with one memory provider holding notes in a list,
  written twice: natively (hermes-core hooks) and as a Hermes provider (``register(ctx)``,
  ``agent.memory_provider``) dropped into ``hermes-plugins/`` and run through the bridge. Same
  logic, same kernel; the difference of the medians is the bridge. Rounds alternate A B A B.
  The same once more as a Hermes *general* plugin: hooks only (``pre_llm_call`` answering the
  recall, ``post_llm_call`` keeping the note), ``ctx.register_hook``.
* **Import and load time, bridge unused**: ``import hermes_core`` in a fresh interpreter, and
  ``PluginHost.load()`` + activating the default providers, with the bridge enabled and with it
  disabled (``HERMES_CORE_DISABLE_PLUGINS=hermes_compat``), a few Hermes plugins installed or
  dropped in, none selected; alternating, medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from hermes_core import MemoryProvider, PluginHost, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.testing import CannedLLM

TARGET_OVERHEAD_MS = 1.0

HERMES_STYLE = '''
from agent.memory_provider import MemoryProvider


class Notes(MemoryProvider):
    name = "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.notes = []

    def get_tool_schemas(self):
        return [{"name": "notes_list", "description": "the notes",
                 "parameters": {"type": "object", "properties": {}}}]

    def system_prompt_block(self):
        return "notes: a frozen block"

    def prefetch(self, query, *, session_id=""):
        return " | ".join(self.notes[-3:])

    def sync_turn(self, user_content, assistant_content, *, session_id="", messages=None):
        self.notes.append(user_content[:40])

    def queue_prefetch(self, query, *, session_id=""):
        return None


def register(ctx):
    ctx.register_memory_provider(Notes())
'''

HERMES_HOOKS = '''
NOTES = []


def pre_llm_call(user_message, **kwargs):
    return {"context": " | ".join(NOTES[-3:])}


def post_llm_call(user_message, **kwargs):
    NOTES.append(user_message[:40])


def register(ctx):
    ctx.register_hook("pre_llm_call", pre_llm_call)
    ctx.register_hook("post_llm_call", post_llm_call)
'''


class NativeNotes(MemoryProvider):
    name = "native-notes"

    def __init__(self, config, context):  # type: ignore[no-untyped-def]
        super().__init__(config, context)
        self.notes: list[str] = []

    @hookimpl
    def system_prompt_block(self, session):  # type: ignore[no-untyped-def]
        return "notes: a frozen block"

    @hookimpl
    def prefetch(self, query, session):  # type: ignore[no-untyped-def]
        return " | ".join(self.notes[-3:])

    @hookimpl
    def sync_turn(self, user_message, assistant_message, session, messages):  # type: ignore[no-untyped-def]
        self.notes.append(user_message.content[:40])

    @hookimpl
    def queue_prefetch(self, query, session):  # type: ignore[no-untyped-def]
        return None

    @hookimpl
    def get_tools(self):  # type: ignore[no-untyped-def]
        return []


def make_agent(home: Path, provider: str) -> Agent:
    import hermes_core_hermes_compat.plugin as bridge

    for name, source in (("notes", HERMES_STYLE), ("notes_hooks", HERMES_HOOKS)):
        folder = home / "hermes-plugins" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text(source, encoding="utf-8")

    class Reg:
        @hookimpl
        def register_memory_providers(self, register):  # type: ignore[no-untyped-def]
            register(NativeNotes)

    config = parse_config_text(f"memory:\n  providers: [{provider}]\n", home / "config.yaml")
    os.environ["HERMES_CORE_HOME"] = str(home)
    host = PluginHost.load(home, config=config, builtins=True, entry_points=False,
                           directories=False, plugins=[("bench", Reg()), ("hermes_compat", bridge)])
    return Agent.create(host, CannedLLM())


def turn_ms(provider: str, turns: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        agent = make_agent(Path(tmp), provider)
        try:
            for _ in range(30):
                agent.run_turn("warm up")
                agent.worker.flush(5)
            samples = []
            for i in range(turns):
                started = time.perf_counter()
                agent.run_turn(f"what did we decide about the depot indexes, take {i}?")
                agent.worker.flush(5)
                samples.append((time.perf_counter() - started) * 1000)
            return statistics.median(samples)
        finally:
            agent.close()


def timed_subprocess(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    return (time.perf_counter() - started) * 1000


LOAD = textwrap.dedent("""
    import time
    t = time.perf_counter()
    from hermes_core.host import PluginHost
    host = PluginHost.load()
    host.activate_memory_providers()
    print((time.perf_counter() - t) * 1000)
""")


def load_ms(env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", LOAD], check=True, env=env, capture_output=True,
                         text=True)
    return float(out.stdout.strip().splitlines()[-1])


def report(label: str, value: float, unit: str, target: float | None = None) -> None:
    ratio = f"  ratio to target {value / target:.2f} (target < {target:g} {unit})" if target else ""
    print(f"{label:<62} {value:9.3f} {unit}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--providers-only", action="store_true",
                        help="only the per-turn figures of the provider (for comparing checkouts)")
    args = parser.parse_args()
    native: list[float] = []
    bridged: list[float] = []
    hooks: list[float] = []
    for _ in range(args.rounds):  # A B A B
        native.append(turn_ms("native-notes", args.turns))
        bridged.append(turn_ms("hermes-notes", args.turns))
        if not args.providers_only:
            hooks.append(turn_ms("hermes-notes-hooks", args.turns))
    n, b = statistics.median(native), statistics.median(bridged)
    print(f"{args.turns} turns per round, {args.rounds} rounds alternating (medians of medians)")
    report("turn with a native provider (median)", n, "ms")
    report("turn with the same provider through the bridge (median)", b, "ms")
    report("bridge overhead per turn", b - n, "ms", TARGET_OVERHEAD_MS)
    if hooks:
        h = statistics.median(hooks)
        report("turn with the same logic as Hermes hooks (median)", h, "ms")
        report("bridge overhead per turn, general plugin (hooks)", h - n, "ms", TARGET_OVERHEAD_MS)
    if args.providers_only:
        return

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        folder = home / "hermes-plugins" / "notes"
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text(HERMES_STYLE, encoding="utf-8")
        base = {**os.environ, "HERMES_CORE_HOME": str(home)}
        base.pop("HERMES_CORE_DISABLE_PLUGINS", None)
        off = {**base, "HERMES_CORE_DISABLE_PLUGINS": "hermes_compat"}
        imports: dict[str, list[float]] = {"on": [], "off": []}
        loads: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(args.rounds * 2):
            for key, env in (("on", base), ("off", off)):
                imports[key].append(timed_subprocess("import hermes_core", env))
                loads[key].append(load_ms(env))
        i_on, i_off = statistics.median(imports["on"]), statistics.median(imports["off"])
        l_on, l_off = statistics.median(loads["on"]), statistics.median(loads["off"])
    probe = ("import sys, hermes_core; "
             "print(sum(m.startswith('hermes_core_hermes_compat') for m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout.strip()
    print(f"{'bridge modules imported by import hermes_core':<62} {loaded:>9}")
    report("python -c 'import hermes_core', bridge installed (median)", i_on, "ms")
    report("  same, bridge disabled (median)", i_off, "ms")
    report("  ratio installed / disabled (target: unchanged, 1.00)", i_on / i_off, "x")
    report("load plugins + default providers, bridge enabled, unused", l_on, "ms")
    report("  same, bridge disabled", l_off, "ms")
    report("  added by discovering Hermes plugins (no import of any)", l_on - l_off, "ms")


if __name__ == "__main__":
    main()
