"""The file memory under concurrency and crashes: threads, processes, SIGKILL mid-write.

Real processes, real files, real ``flock``; the only trick is, in one test, making the writer kill
itself at an exact point (from inside ``os.fsync``) so "killed in the middle of a write" is not left
to chance. A second test kills writers at random moments.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from hermes_core.plugins.memory.file_memory.entries import canonical_text, parse_entries
from hermes_core.plugins.memory.file_memory.store import MemoryStore

PREAMBLE = """
import os, sys, signal, time
from pathlib import Path
from hermes_core.plugins.memory.file_memory.store import MemoryStore
from hermes_core.plugins.memory.file_memory import store as store_mod
"""


def run_script(tmp_path: Path, name: str, body: str, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(PREAMBLE + textwrap.dedent(body), encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def leftovers(folder: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(suffix))


def test_threads_and_two_store_objects_lose_nothing(tmp_path):
    folder = tmp_path / "memories"
    stores = [MemoryStore(folder, memory_limit=100_000) for _ in range(2)]
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(40):
                stores[worker % 2].add("memory", f"thread entry [t{worker}:{n}]")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    entries = stores[0].entries("memory")
    assert len(entries) == 320
    assert set(entries) == {f"thread entry [t{w}:{n}]" for w in range(8) for n in range(40)}


WORKER = """
folder, worker, go = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
store = MemoryStore(folder, memory_limit=100_000)
while not go.exists():
    time.sleep(0.001)
for k in range(50):  # 4 operations per round: 200 in all
    store.add("memory", f"entry [w{worker}:a{k}]")
    store.add("memory", f"entry [w{worker}:b{k}]")
    store.replace("memory", f"[w{worker}:a{k}]", f"entry [w{worker}:a{k}] replaced")
    store.remove("memory", f"[w{worker}:b{k}]")
print("done")
"""


def test_four_processes_200_operations_each_lose_nothing(tmp_path):
    folder = tmp_path / "memories"
    go = tmp_path / "go"
    procs = [run_script(tmp_path, f"w{i}", WORKER, str(folder), str(i), str(go)) for i in range(4)]
    time.sleep(0.3)  # let every interpreter start, so the operations really overlap
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    text = (folder / "MEMORY.md").read_text(encoding="utf-8")
    entries = parse_entries(text)
    expected = {f"entry [w{w}:a{k}] replaced" for w in range(4) for k in range(50)}
    assert len(entries) == 200 and set(entries) == expected
    assert text == canonical_text(entries) + "\n"  # parseable and in canonical form
    assert leftovers(folder, ".tmp") == [] and leftovers(folder, ".bak") == []


KILL_IN_FSYNC = """
folder = Path(sys.argv[1])
store = MemoryStore(folder)
store.add("memory", "the old entry")

def die(fd):
    os.kill(os.getpid(), signal.SIGKILL)  # dies with the new text written but not renamed

store_mod.os.fsync = die
store.replace("memory", "old entry", "the new entry")
print("not reached")
"""


def test_a_writer_killed_mid_write_leaves_the_old_file(tmp_path):
    folder = tmp_path / "memories"
    proc = run_script(tmp_path, "killed", KILL_IN_FSYNC, str(folder))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    assert "not reached" not in out
    assert (folder / "MEMORY.md").read_text(encoding="utf-8") == "the old entry\n"
    orphans = leftovers(folder, ".tmp")
    assert len(orphans) == 1  # the half-done write
    store = MemoryStore(folder)
    # the change was recorded in the history before the writer died: opening completes it
    assert store.entries("memory") == ["the new entry"]
    store.add("memory", "one more")
    assert store.entries("memory") == ["the new entry", "one more"]
    assert leftovers(folder, ".tmp") == []  # swept under the lock


FLIP_FLOP = """
folder = Path(sys.argv[1])
store = MemoryStore(folder, memory_limit=1_000_000)
a, b = "A" * 300_000, "B" * 300_000
if not store.entries("memory"):
    store.add("memory", a)
print("ready", flush=True)
while True:
    current = store.entries("memory")[0]
    store.replace("memory", current[:10], b if current == a else a)
"""


def test_random_kills_leave_the_old_or_the_new_file(tmp_path):
    # Complements the deterministic test above: kills land anywhere in the loop (reading,
    # scanning, writing the temp file, renaming); every time the file must be whole.
    folder = tmp_path / "memories"
    valid = {("A" * 300_000 + "\n").encode(), ("B" * 300_000 + "\n").encode()}
    rng = random.Random(1234)
    for attempt in range(8):
        proc = run_script(tmp_path, f"flip{attempt}", FLIP_FLOP, str(folder))
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.005, 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert (folder / "MEMORY.md").read_bytes() in valid, f"attempt {attempt}"
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    store = MemoryStore(folder, memory_limit=1_000_000)
    assert len(store.entries("memory")) == 1
