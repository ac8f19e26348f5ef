"""Indexing speed of the local embedder, and what the embedder costs a replay's turns.

1. **texts/s**: all-MiniLM-L6-v2 (plugins/embedders/minilm) on the chat messages of examples/
   (the replay transcripts' user and assistant messages and every distinct turn of the eval
   paraphrase sets, cut to 2,000 characters as the archive's indexer does), A B A B against
   another checkout's embedder imported by path (``--base DIR``, e.g. a ``git worktree`` of an
   older commit), medians, ratio to the target (200 texts/s on 2 cores). Wall-clock rates
   depend on what else runs on the machine, so the CPU-time rate (this process's CPU seconds,
   one BLAS thread) is printed beside it. The lowest cosine between the two checkouts' vectors
   of the same text shows the arithmetic is unchanged.
2. **replay turns/s**: ``hermes-core replay`` of an example transcript in a scratch home with
   the embedder installed (``embeddings.embedder: auto``) and with ``none``, A B A B, each run a
   fresh process, medians, ratio to the target (0.8). turns/s is the replay's own figure (turns
   over the whole run: start of the first turn to the end of the shutdown); beside it the sum of
   the turns' own times. With ``--base`` the other checkout's replay runs in the same rounds
   (its package imported from that folder).

3. **runtimes** (``--runtimes``): this checkout's embedder with ``runtime: numpy`` and with
   ``runtime: onnxruntime`` (float32, and int8 weights with ``quantize``), at 1 and 2 threads
   (``blas_threads``), A B C ... alternated in one process on the same texts, medians of texts/s
   wall and per CPU second, ratios to the target, the lowest cosine of each side's vectors to
   numpy's, and the load average before and after.

Run: ``python bench/bench_embed.py [--base DIR] [--rounds N] [--transcript FILE]
[--skip-texts] [--skip-replay] [--runtimes] [--threads 1,2]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEXTS_TARGET = 200.0
REPLAY_TARGET = 0.8


def chat_texts(root: Path = ROOT) -> list[str]:
    """User and assistant messages of the example transcripts and eval sets (2,000 chars)."""
    out: list[str] = []
    seen: set[str] = set()
    for path in sorted((root / "examples").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if obj.get("role") in ("user", "assistant") and obj.get("content"):
                out.append(obj["content"][:2000])
    for path in sorted((root / "examples" / "eval").glob("paraphrase*.json")):
        for question in json.loads(path.read_text(encoding="utf-8")):
            for session in question["haystack_sessions"]:
                for turn in session:
                    if turn["content"] not in seen:
                        seen.add(turn["content"])
                        out.append(turn["content"][:2000])
    return out


def load_embedder(root: Path, name: str, **config: Any) -> Any:
    """The minilm embedder of the checkout at ``root``, imported by path as module ``name``
    (once), with ``config`` (fields of its MiniLMConfig)."""
    folder = root / "plugins" / "embedders" / "minilm"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    embedder = module.MiniLMEmbedder(module.MiniLMConfig(**config))
    embedder.embed(["load the model"])
    return embedder


def rates(embedder: Any, texts: list[str]) -> tuple[float, float]:
    """(texts per wall second, texts per CPU second) of one embedding of ``texts``."""
    wall, cpu = time.perf_counter(), time.process_time()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - wall), len(texts) / (time.process_time() - cpu)


def bench_texts(base: Path | None, rounds: int) -> None:
    import numpy as np

    texts = chat_texts()
    chars = statistics.median(len(t) for t in texts)
    sides = {"this checkout": load_embedder(ROOT, "bench_minilm_new")}
    if base is not None:
        sides["base " + base.name] = load_embedder(base.resolve(), "bench_minilm_base")
    tokenizer = sides["this checkout"]._load()[1]
    pieces = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    print(f"texts: {len(texts)} chat messages, median {chars:.0f} chars, "
          f"{statistics.mean(pieces):.1f} word pieces on average (at most 128)")
    if base is not None:
        a, b = (np.asarray(e.embed(texts)) for e in sides.values())
        print(f"  lowest cosine between the two checkouts' vectors: {float((a * b).sum(1).min()):.7f}"
              " (target >= 0.9999)")
    figures: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for _ in range(rounds):  # A B A B
        for key, embedder in sides.items():
            figures[key].append(rates(embedder, texts))
    for key, runs in figures.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"  {key:24s} {wall:7.1f} texts/s wall ({wall / TEXTS_TARGET:.2f}x the target), "
              f"{cpu:7.1f} texts/CPU-s ({cpu / TEXTS_TARGET:.2f}x)")
    if base is not None:
        new, old = (statistics.median(r[1] for r in runs) for runs in figures.values())
        wnew, wold = (statistics.median(r[0] for r in runs) for runs in figures.values())
        print(f"  speed-up over the base: {wnew / wold:.2f}x wall, {new / old:.2f}x CPU time")


def bench_runtimes(rounds: int, threads: list[int]) -> None:
    import numpy as np

    texts = chat_texts()
    load = os.getloadavg()[0]
    sides: dict[str, Any] = {"numpy, 1 thread": load_embedder(ROOT, "bench_minilm_new",
                                                                runtime="numpy")}
    for quantize in (False, True):
        for n in threads:
            started = time.perf_counter()
            key = f"onnxruntime {'int8' if quantize else 'fp32'}, {n} thread{'s' * (n > 1)}"
            sides[key] = load_embedder(ROOT, "bench_minilm_new", runtime="onnxruntime",
                                       blas_threads=n, quantize=quantize)
            print(f"  {key}: built and loaded in {time.perf_counter() - started:.2f} s")
    print(f"runtimes on {len(texts)} chat messages, {rounds} rounds alternated; load average "
          f"{load:.1f} at the start")
    reference = np.asarray(sides["numpy, 1 thread"].embed(texts))
    for key, embedder in sides.items():
        cos = (np.asarray(embedder.embed(texts)) * reference).sum(1)
        print(f"  {key:28s} cosine to numpy: lowest {float(cos.min()):.6f}, median "
              f"{float(np.median(cos)):.6f}")
    figures: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for _ in range(rounds):
        for key, embedder in sides.items():
            figures[key].append(rates(embedder, texts))
    base = statistics.median(r[0] for r in figures["numpy, 1 thread"])
    for key, runs in figures.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"  {key:28s} {wall:7.1f} texts/s wall ({wall / TEXTS_TARGET:.2f}x the target, "
              f"{wall / base:.2f}x numpy), {cpu:7.1f} texts/CPU-s ({cpu / TEXTS_TARGET:.2f}x); "
              f"walls {[round(r[0]) for r in runs]}")
    print(f"  load average {os.getloadavg()[0]:.1f} at the end of the runtimes")


def replay_rate(transcript: Path, embedder: str, root: Path = ROOT) -> tuple[float, float]:
    """(turns/s of the whole replay, the sum of its turns' own milliseconds) of one fresh
    process replaying ``transcript`` with the checkout at ``root``."""
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as home:
        Path(home, "config.yaml").write_text(f"embeddings:\n  embedder: {embedder}\n")
        env = {**os.environ, "HERMES_CORE_HOME": home}
        if root != ROOT:  # the other checkout's package first on the path
            env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
        out = subprocess.run([sys.executable, "-m", "hermes_core", "replay", "--json",
                              str(transcript)], env=env, capture_output=True, text=True,
                             check=True, cwd=root)
        report = json.loads(out.stdout)
        return (float(report["summary"]["turns_per_second"]),
                sum(float(t["ms"]) for t in report["turns"]))


def bench_replay(transcript: Path, rounds: int, base: Path | None) -> None:
    sides = {"this checkout": ROOT} | ({"base " + base.name: base.resolve()} if base else {})
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {
        (side, emb): [] for side in sides for emb in ("auto", "none")}
    for _ in range(rounds):  # A B A B (and the base's between)
        for side, emb in runs:
            runs[side, emb].append(replay_rate(transcript, emb, sides[side]))
    for side in sides:
        (with_, with_ms), (without, without_ms) = (
            (statistics.median(r[0] for r in runs[side, emb]),
             statistics.median(r[1] for r in runs[side, emb])) for emb in ("auto", "none"))
        print(f"replay {transcript.name}, {side}: {with_:.1f} turns/s with the embedder, "
              f"{without:.1f} without; ratio {with_ / without:.2f} (target >= {REPLAY_TARGET}); "
              f"the turns' own time {with_ms:.0f} ms against {without_ms:.0f} ms "
              f"(ratio {without_ms / with_ms:.2f})")
        for emb in ("auto", "none"):
            print(f"    {emb:4s} turns/s {[round(r[0], 1) for r in runs[side, emb]]}, "
                  f"turn ms {[round(r[1]) for r in runs[side, emb]]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--transcript", type=Path,
                        default=ROOT / "examples" / "first-week.jsonl")
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument("--skip-texts", action="store_true", help="only the replay part")
    parser.add_argument("--runtimes", action="store_true",
                        help="numpy against onnxruntime (fp32 and int8) in this checkout")
    parser.add_argument("--threads", default="1,2", help="onnxruntime's threads, e.g. 1,2")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not args.skip_texts:
        bench_texts(args.base, args.rounds)
    if args.runtimes:
        bench_runtimes(args.rounds, [int(n) for n in args.threads.split(",")])
    if not args.skip_replay:
        bench_replay(args.transcript, args.rounds, args.base)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
