"""The memory files and their history when the writer is killed with SIGKILL mid-change.

A change is recorded as a version before the files are replaced. Real processes kill themselves
at an exact point (right after a file is replaced, or right before): afterwards the files must
be what the history's newest version says (a rollback is never half-applied, no version
describes a write that did not happen), and a write cut short before its version was recorded
changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from hermes_core.plugins.memory.file_memory.store import MemoryStore
from hermes_core.plugins.memory.file_memory.versions import rollback

PREAMBLE = """
import os, signal, sys
from pathlib import Path
from hermes_core.plugins.memory.file_memory import store as store_mod, versions
from hermes_core.plugins.memory.file_memory.history import History
from hermes_core.plugins.memory.file_memory.store import MemoryStore
folder = Path(sys.argv[1])
"""


def run_killed(tmp_path: Path, body: str) -> None:
    """Run ``body`` in a child process that must end by killing itself with SIGKILL."""
    script = tmp_path / "child.py"
    script.write_text(PREAMBLE + textwrap.dedent(body), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "memories")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr


def newest_after(store: MemoryStore) -> dict[str, bytes | None]:
    """Each store's bytes as the history's newest version touching it says."""
    assert store.history is not None
    versions = store.history.read()
    out: dict[str, bytes | None] = {}
    for target in ("memory", "user"):
        touching = [v for v in versions if target in v.stores]
        text = touching[-1].stores[target].get("after") if touching else None
        out[target] = text.encode("utf-8") if text else None
    return out


def on_disk(store: MemoryStore) -> dict[str, bytes | None]:
    return {t: store.read(t).raw or None for t in ("memory", "user")}


def seeded(folder: Path) -> int:
    """Three versions touching both files; the number of the first."""
    store = MemoryStore(folder)
    store.add("memory", "fact one")
    store.add("user", "likes tea")
    store.add("memory", "fact two")
    store.add("user", "lives in Lyon")
    assert store.history is not None
    return store.history.read()[1].version


def test_a_rollback_killed_between_its_two_files_is_completed(tmp_path):
    folder = tmp_path / "memories"
    target = seeded(folder)
    run_killed(tmp_path, f"""
        real = versions.atomic_write
        def write_then_die(path, data, **kw):
            real(path, data, **kw)
            os.kill(os.getpid(), signal.SIGKILL)  # one file replaced, the other not yet
        versions.atomic_write = write_then_die
        versions.rollback(MemoryStore(folder), {target})
    """)
    store = MemoryStore(folder)
    assert store.history is not None
    last = store.history.read()[-1]
    assert last.action == "rollback" and last.restores == target
    assert store.entries("memory") == ["fact one"]
    assert store.entries("user") == ["likes tea"]
    assert on_disk(store) == newest_after(store)
    assert not list(folder.glob(".*.intent"))


def test_a_write_killed_after_its_version_was_recorded_is_completed(tmp_path):
    folder = tmp_path / "memories"
    seeded(folder)
    reader = MemoryStore(folder)  # opened before the writer died
    run_killed(tmp_path, """
        def die(path, data, **kw):
            os.kill(os.getpid(), signal.SIGKILL)  # the version is in the history, the file old
        store_mod.atomic_write = die
        MemoryStore(folder).add("memory", "fact three")
    """)
    # a plain read (no write) already sees the change the history records
    assert reader.read("memory").entries == ["fact one", "fact two", "fact three"]
    store = MemoryStore(folder)
    assert on_disk(store) == newest_after(store)
    store.add("memory", "fact four")  # and the history goes on consistently
    assert on_disk(store) == newest_after(store)
    assert [v.version for v in store.history.read()] == list(range(1, 7))  # type: ignore[union-attr]


def test_a_write_killed_before_its_version_was_recorded_changes_nothing(tmp_path):
    folder = tmp_path / "memories"
    seeded(folder)
    before = (folder / "MEMORY.md").read_bytes()
    run_killed(tmp_path, """
        def die(self, build):
            os.kill(os.getpid(), signal.SIGKILL)
        History.append = die
        MemoryStore(folder).add("memory", "fact three")
    """)
    store = MemoryStore(folder)
    assert (folder / "MEMORY.md").read_bytes() == before
    assert len(store.history.read()) == 4  # type: ignore[union-attr]
    assert on_disk(store) == newest_after(store)
    assert not list(folder.glob(".*.intent"))


def test_a_file_edited_by_hand_after_a_dead_writer_is_left_alone(tmp_path):
    folder = tmp_path / "memories"
    target = seeded(folder)
    run_killed(tmp_path, """
        def die(path, data, **kw):
            os.kill(os.getpid(), signal.SIGKILL)
        versions.atomic_write = die
        versions.rollback(MemoryStore(folder), 2)
    """.replace("2)", f"{target})"))
    (folder / "MEMORY.md").write_text("edited by hand\n", encoding="utf-8")
    store = MemoryStore(folder)
    assert store.entries("memory") == ["edited by hand"]
    assert store.entries("user") == ["likes tea"]  # the other file's half is completed
    rollback(store, target)  # and the store keeps working
    assert store.entries("memory") == ["fact one"]
