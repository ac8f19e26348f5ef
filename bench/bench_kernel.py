"""Kernel benchmarks: CLI cold start and kernel import time.

The per-turn overhead of the kernel's hook calls is measured through a whole agent turn by
bench/bench_agent.py (providers without I/O, a stub LLM).

Prints medians and their ratio to the targets of issue 2 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_kernel.py [--runs 15] [--against SRC] [--hermes DIR] [--import-only]

The imports timed are the kernel (``hermes_core.host``), the session store and the file memory.
``--against SRC`` times them from another source tree too (a checkout or a ``git archive`` of
main), ``--hermes DIR`` times Hermes Agent's equivalents (``hermes_state`` and
``tools.memory_tool`` from an unpacked hermes-agent 0.19.0 wheel or a site-packages holding it),
all alternated (A B A B) in one run; ``--import-only`` prints only these. Besides wall time it
prints the child's CPU time (user + sys), which a loaded machine inflates much less than wall time.

The 20 "installed" plugins are real distributions written as dist-info folders (what pip writes)
into a directory on PYTHONPATH, so importlib.metadata discovers them as it discovers pip installs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN_SRC = '''
from hermes_core import MemoryProvider, hookimpl

class P{i}(MemoryProvider):
    name = "bench_provider_{i}"

@hookimpl
def register_memory_providers(register):
    register(P{i})
'''


def make_site(root: Path, count: int) -> Path:
    site = root / f"site{count}"
    site.mkdir()
    for i in range(count):
        (site / f"bench_plugin_{i}.py").write_text(PLUGIN_SRC.format(i=i))
        info = site / f"bench_plugin_{i}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bench-plugin-{i}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(
            f"[hermes_core.plugins]\nbench{i} = bench_plugin_{i}\n")
    return site


def time_command(cmd: list[str], env: dict[str, str], runs: int) -> float:
    samples = []
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm the page cache
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def report(label: str, value: float, unit: str, target: float | None) -> None:
    ratio = f"  ratio to target {value / target:.2f} (target {target:g} {unit})" if target else ""
    print(f"{label:<52} {value:9.1f} {unit}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", type=Path, default=None,
                        help="another source tree to time the kernel import from, side by side")
    parser.add_argument("--import-only", action="store_true",
                        help="time only the imports: the kernel, the session store, the file memory "
                             "(with --against: both trees; with --hermes: Hermes' equivalents)")
    parser.add_argument("--hermes", type=Path, default=None,
                        help="a directory holding hermes-agent's modules (an unpacked hermes-agent "
                             "wheel, or a site-packages with it installed): time hermes_state and "
                             "tools.memory_tool beside the session store and the file memory")
    args = parser.parse_args()
    if args.import_only:
        kernel_import(args.runs, dict(os.environ), args.against, args.hermes)
        return
    exe = shutil.which("hermes-core", path=str(Path(sys.executable).parent)) or "hermes-core"
    print(f"python {sys.version.split()[0]}, {args.runs} runs per figure, medians")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        base_env = {**os.environ, "HERMES_CORE_HOME": str(root / "home")}
        base_env.pop("HERMES_CORE_DISABLE_PLUGINS", None)
        # the bytecode cache is written on the first run, as pip writes it at install: without
        # it every run compiles every module and the figures say nothing about a user's start-up
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        report("python -c pass", time_command([sys.executable, "-c", "pass"], base_env, args.runs),
               "ms", None)
        report("import hermes_core", time_command(
            [sys.executable, "-c", "import hermes_core"], base_env, args.runs), "ms", 100)
        kernel_import(args.runs, base_env, args.against, args.hermes)
        for count in (0, 20):
            site = make_site(root, count)
            env = {**base_env, "PYTHONPATH": os.pathsep.join(
                [str(site), base_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
            report(f"hermes-core --help, {count} plugins installed",
                   time_command([exe, "--help"], env, args.runs), "ms", 150 if count else None)
            report(f"hermes-core plugins list, {count} plugins installed",
                   time_command([exe, "plugins", "list"], env, args.runs), "ms", None)
    pytest_plugin_import(args.runs, base_env)
    facade_overhead(args.runs)
    print("per-turn kernel overhead (hook calls of a whole turn, 1 and 10 providers): "
          "python bench/bench_agent.py")


#: what ``--import-only`` times: (label, module of this tree, Hermes Agent's equivalent or None)
IMPORTS = (
    ("kernel", "hermes_core.host", None),
    ("session store", "hermes_core.plugins.memory.session_archive", "hermes_state"),
    ("file memory", "hermes_core.plugins.memory.file_memory", "tools.memory_tool"),
)


def _probe(module: str) -> str:
    """Import ``module`` and print the file of its top-level package (which tree it came from)."""
    top = module.split(".")[0]
    return f"import sys, {module}; print(sys.modules[{top!r}].__file__)"


def kernel_import(runs: int, env: dict[str, str], against: Path | None,
                  hermes: Path | None = None) -> None:
    """Each module of :data:`IMPORTS` imported in a fresh interpreter: from this tree (A), with
    ``against`` from that tree too (B), and with ``hermes`` (a directory holding hermes-agent's
    modules: an unpacked wheel or a site-packages) Hermes Agent's equivalent, all alternated
    A B A B with a bare interpreter (``-c pass``) in one run. Medians of wall time and of the
    child's CPU time (user + sys), the kernel's with its ratio to the 100 ms target of issue 34,
    each import's own share (minus the bare interpreter), and the ratios this tree / --against
    and this tree / Hermes."""
    here = Path(__file__).resolve().parents[1]
    runs_of: dict[str, tuple[Path, str]] = {"bare interpreter (-c pass)": (here, "pass")}
    for label, module, theirs in IMPORTS:
        runs_of[f"{label}: this tree"] = (here, _probe(module))
        if against is not None:
            runs_of[f"{label}: --against {against.name}"] = (against.resolve(), _probe(module))
        if hermes is not None and theirs is not None:
            runs_of[f"{label}: Hermes' {theirs}"] = (hermes.resolve(), _probe(theirs))
    wall: dict[str, list[float]] = {name: [] for name in runs_of}
    cpu: dict[str, list[float]] = {name: [] for name in runs_of}
    with tempfile.TemporaryDirectory() as scratch:  # cwd: '' on sys.path must not be a tree
        for turn in range(runs + 1):
            for name, (root, code) in runs_of.items():
                child_env = {**env, "PYTHONPATH": str(root)}
                child_env.pop("PYTHONDONTWRITEBYTECODE", None)  # the first round writes it
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", code], env=child_env, cwd=scratch,
                                      capture_output=True, text=True)
                elapsed = (time.perf_counter() - start) * 1000
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if done.returncode:
                    raise SystemExit(f"{name}: the import failed (is {root} the right tree?):\n"
                                     f"{done.stderr.strip()}")
                if code != "pass" and not done.stdout.startswith(str(root)):
                    raise SystemExit(f"{name}: imported {done.stdout.strip()}, not a module of {root}")
                if turn:  # the first round warms the page cache and writes the bytecode cache
                    wall[name].append(elapsed)
                    cpu[name].append((after.ru_utime - before.ru_utime
                                      + after.ru_stime - before.ru_stime) * 1000)
    medians = {name: (statistics.median(wall[name]), statistics.median(cpu[name]))
               for name in runs_of}
    bare_wall, bare_cpu = medians.pop("bare interpreter (-c pass)")
    print(f"{runs} rounds A B A B, medians; 'own' = minus the bare interpreter")
    print(f"{'bare interpreter (-c pass)':<44} wall {bare_wall:7.1f} ms, CPU {bare_cpu:7.1f} ms")
    for name, (wall_ms, cpu_ms) in medians.items():
        target = "  (target 100 ms)" if name.startswith("kernel") else ""
        print(f"{'import, ' + name:<44} wall {wall_ms:7.1f} ms, CPU {cpu_ms:7.1f} ms; own: wall "
              f"{wall_ms - bare_wall:7.1f} ms, CPU {cpu_ms - bare_cpu:7.1f} ms{target}")
    for label, _, theirs in IMPORTS:
        ours = medians[f"{label}: this tree"]
        others = [(f"--against {against.name}", f"{label}: --against {against.name}")] if against else []
        if hermes is not None and theirs is not None:
            others.append((f"Hermes' {theirs}", f"{label}: Hermes' {theirs}"))
        for what, key in others:
            o_wall, o_cpu = medians[key]
            own_wall = _ratio(ours[0] - bare_wall, o_wall - bare_wall)
            own_cpu = _ratio(ours[1] - bare_cpu, o_cpu - bare_cpu)
            print(f"  {label}, this tree / {what}: wall {ours[0] / o_wall:.2f}, CPU "
                  f"{ours[1] / o_cpu:.2f}; own parts: wall {own_wall}, CPU {own_cpu}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "n/a"


def pytest_plugin_import(runs: int, env: dict[str, str]) -> None:
    """What the pytest11 plugin adds to every pytest start in a venv holding hermes-core: the
    lazy package now (A) against what it imported before (B: the harness and the Messages API
    server, and through them the kernel and pydantic), alternated A B A B, medians."""
    lazy = [sys.executable, "-c", "import pytest, hermes_core.testing.pytest_plugin"]
    eager = [sys.executable, "-c", "import pytest, hermes_core.testing.pytest_plugin, "
             "hermes_core.testing.harness, hermes_core.testing.messages_api"]
    bare = [sys.executable, "-c", "import pytest"]
    samples: dict[str, list[float]] = {"bare": [], "lazy": [], "eager": []}
    for _ in range(runs):
        for name, cmd in (("bare", bare), ("lazy", lazy), ("eager", eager)):
            start = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            samples[name].append((time.perf_counter() - start) * 1000)
    base = statistics.median(samples["bare"])
    lazy_ms = statistics.median(samples["lazy"]) - base
    eager_ms = statistics.median(samples["eager"]) - base
    print(f"{'pytest11 plugin import over import pytest: now':<52} {lazy_ms:9.1f} ms")
    print(f"{'  before (package imported harness + server)':<52} {eager_ms:9.1f} ms  "
          f"ratio now/before {lazy_ms / eager_ms if eager_ms > 0 else float('nan'):.2f}")


def facade_overhead(runs: int, calls: int = 2000) -> None:
    """One ``on_message`` call to 1 and 10 no-op providers: ``host.hooks`` against a bare
    ``pm.hook.on_message`` over the same instances, alternated (A B A B) in one process."""
    import statistics
    import time

    from hermes_core import MemoryProvider, PluginHost, hookimpl
    from hermes_core.config import parse_config_text
    from hermes_core.types import Message, Session

    class NoOp(MemoryProvider):
        @hookimpl
        def on_message(self, message, session):
            return None

    message, session = Message("user", "hello"), Session(id="bench")
    for count in (1, 10):
        classes = [type(f"N{i}", (NoOp,), {"name": f"n{i}"}) for i in range(count)]

        class Reg:
            def __init__(self, offered: list[type]) -> None:
                self.offered = offered

            @hookimpl
            def register_memory_providers(self, register):
                for cls in self.offered:
                    register(cls)

        with tempfile.TemporaryDirectory() as tmp:
            names = ", ".join(c.name for c in classes)
            config = parse_config_text(f"memory:\n  providers: [{names}]\n", Path(tmp) / "c.yaml")
            host = PluginHost.load(Path(tmp), config=config, builtins=False, entry_points=False,
                                   directories=False, plugins=[("bench", Reg(classes))])
            host.activate_memory_providers()
            bare, facade = [], []
            for _ in range(runs):
                start = time.perf_counter()
                for _ in range(calls):
                    host.pm.hook.on_message(message=message, session=session)
                bare.append((time.perf_counter() - start) / calls * 1e6)
                start = time.perf_counter()
                for _ in range(calls):
                    host.hooks.on_message(message=message, session=session)
                facade.append((time.perf_counter() - start) / calls * 1e6)
            host.shutdown()
        b, f = statistics.median(bare), statistics.median(facade)
        print(f"on_message, {count:>2} provider(s): bare pm.hook {b:8.1f} us, host.hooks {f:8.1f} us "
              f"(+{f - b:.1f} us per call, {(f - b) / count:.1f} us per implementation: "
              "isolation, deadline lane, tracing check)")


if __name__ == "__main__":
    main()
