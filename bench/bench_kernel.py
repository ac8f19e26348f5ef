"""Kernel benchmarks: CLI cold start and kernel import time.

The per-turn overhead of the kernel's hook calls is measured through a whole agent turn by
bench/bench_agent.py (providers without I/O, a stub LLM).

Prints medians and their ratio to the targets of issue 2 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_kernel.py [--runs 15]

The 20 "installed" plugins are real distributions written as dist-info folders (what pip writes)
into a directory on PYTHONPATH, so importlib.metadata discovers them as it discovers pip installs.
"""

from __future__ import annotations

import argparse
import os
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
    args = parser.parse_args()
    exe = shutil.which("hermes-core", path=str(Path(sys.executable).parent)) or "hermes-core"
    print(f"python {sys.version.split()[0]}, {args.runs} runs per figure, medians")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        base_env = {**os.environ, "HERMES_CORE_HOME": str(root / "home")}
        base_env.pop("HERMES_CORE_DISABLE_PLUGINS", None)
        report("python -c pass", time_command([sys.executable, "-c", "pass"], base_env, args.runs),
               "ms", None)
        report("import hermes_core", time_command(
            [sys.executable, "-c", "import hermes_core"], base_env, args.runs), "ms", 100)
        report("import the kernel (host, config, hookspecs, pydantic)", time_command(
            [sys.executable, "-c", "import hermes_core.host"], base_env, args.runs), "ms", 100)
        for count in (0, 20):
            site = make_site(root, count)
            env = {**base_env, "PYTHONPATH": os.pathsep.join(
                [str(site), base_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
            report(f"hermes-core --help, {count} plugins installed",
                   time_command([exe, "--help"], env, args.runs), "ms", 150 if count else None)
            report(f"hermes-core plugins list, {count} plugins installed",
                   time_command([exe, "plugins", "list"], env, args.runs), "ms", None)
    print("per-turn kernel overhead (hook calls of a whole turn, 1 and 10 providers): "
          "python bench/bench_agent.py")


if __name__ == "__main__":
    main()
