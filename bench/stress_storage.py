"""Data-loss attacks on the stores, PostgreSQL first: real processes, real ``kill -9``, counts.

Repeats the "nothing lost" measurements made on SQLite files against the ``storage.url``
backend (a throwaway real PostgreSQL on 127.0.0.1) and the newer stores::

    python bench/stress_storage.py [--quick] [--only memory,archive,revert,lossless,vectors,migrate]

(the worker processes it starts are bench/stress_workers.py)

* ``memory``: N processes add / replace / remove curated-memory entries through the store API,
  on the shared owner and two per-user owners at once, then the same again while entries are
  being written and processes are killed with SIGKILL at random moments. Every acknowledged op
  must be in the final documents exactly once (an op cut short may or may not be), no torn
  entry, the limits held, and the history must replay to the documents.
* ``archive``: 4 processes append to their own and to shared sessions (some with token usage),
  then again under SIGKILL: every acknowledged message once, in order per writer and session,
  ``message_count`` and the token counters equal to the rows.
* ``revert``: a process adds to both documents and rolls back to random versions in a loop,
  killed at random moments, on PostgreSQL and on the files: after each kill the documents must
  equal the state the history's newest version describes (no half-applied rollback, no version
  for a write that did not happen).
* ``lossless``: the lossless engine's span archive under SIGKILL (PostgreSQL and SQLite): every
  acknowledged span with all its messages, none half-written.
* ``vectors``: the archive's background indexer (a fast fake embedder: only the model is fake)
  killed while it embeds: no vector for another message's text, no gap reindex cannot fill.
* ``migrate``: ``storage migrate --to`` while a writer keeps appending to the source archive.

Nothing here asserts: it prints what it counted (``lost``, ``torn``, ``dup`` should all be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# the worker processes, and the stores as they open them (sets sys.path for the plugins)
from stress_workers import (
    ENTRY,
    OWNERS,
    ROOT,
    HashEmbedder,
    archive_at,
    guarded,
    memory_store,
    span_store,
)

# ------------------------------------------------------------------------- attacks and checks


def check_lossless(url: str | None, home: str, logs: list[list[str]]) -> dict[str, int]:
    store = span_store(url, home)
    acked = maybe = 0
    lost = torn = dup = 0
    for log in logs:
        for fields, ok in _ops(log):
            conv, tag, n = fields[0], fields[1], int(fields[2])
            spans = [sp for sp in store.spans(conv) if sp.digest == f"digest {tag}"]
            if len(spans) > 1:
                dup += 1
            if ok:
                acked += 1
                lost += 0 if spans else 1
            else:
                maybe += 1
            for sp in spans:
                texts = [m.message.content for m in store.messages(sp.id, 0, 100)]
                if sp.n_messages != n or texts != [f"{tag} m{k}" for k in range(n)]:
                    torn += 1
    return {"acknowledged": acked, "cut_short": maybe, "lost": lost, "dup": dup, "torn": torn}


def attack_lossless(url: str, kills: int) -> None:
    for backend in ("postgresql", "sqlite"):
        home = tempfile.mkdtemp(prefix="stress-lossless-")
        bu = url if backend == "postgresql" else None
        rng = random.Random(9)
        run = Run()
        for i in range(kills):
            run.start("lossless", i, [*(["--url", bu] if bu else ["--home", home]),
                                      "--seed", str(i)])
            run.wait_begins(len(run.procs) - 1, rng.randint(1, 30))
            time.sleep(rng.random() * 0.005)
            run.kill(len(run.procs) - 1)
        run.join()
        counts = check_lossless(bu, home, run.logs)
        _print("lossless", f"kill {backend[:6]}", {"kills": kills, **counts})


def vector_counts(archive: Any) -> dict[str, int]:
    """Embeddable messages without a vector, and vectors not made from their message's text."""
    import numpy as np
    from memory.session_archive.vector_store import _EMBEDDABLE
    from memory.session_archive.vectors import TEXT_CHARS

    fake = HashEmbedder()
    rows = archive.db.read(f"SELECT m.id, substr(m.content, 1, {TEXT_CHARS}), v.vec FROM "
                           "messages AS m LEFT JOIN message_vectors AS v ON v.id = m.id "
                           f"WHERE {_EMBEDDABLE}")
    missing = wrong = 0
    for _mid, text, vec in rows:
        if vec is None:
            missing += 1
            continue
        stored = np.frombuffer(bytes(vec), dtype=np.float16).astype(np.float32)
        if float(np.dot(stored, np.asarray(fake.embed([text])[0]))) < 0.99:
            wrong += 1
    return {"embeddable": len(rows), "missing": missing, "wrong_text": wrong}


def _index_all(archive: Any) -> None:
    from memory.session_archive.vectors import index_batch

    embedder = guarded()
    while index_batch(archive, embedder, 64) > 0:
        pass


def _reindex(archive: Any) -> None:
    from memory.session_archive.vectors import reindex

    reindex(archive, guarded(), batch=64)


def attack_vectors(url: str, kills: int) -> None:
    """The background indexer under SIGKILL; ids reused after a forget (SQLite); a long
    transaction committing below the cursor (PostgreSQL)."""
    from memory.session_archive.forget import forget_messages

    from hermes_core.types import Message

    for backend in ("postgresql", "sqlite"):
        home = tempfile.mkdtemp(prefix="stress-vec-")
        bu = url if backend == "postgresql" else None
        if bu:
            _reset_archive(bu)
        rng = random.Random(3)
        for i in range(kills):
            run = Run()
            run.start("indexer", i, [*(["--url", bu] if bu else ["--home", home]),
                                     "--seed", str(i)])
            run.wait_begins(0, rng.randint(1, 4))
            time.sleep(rng.random() * 0.01)
            run.kill(0)
            run.join()
        archive = archive_at(bu, home)
        _index_all(archive)
        after = vector_counts(archive)
        _reindex(archive)
        again = vector_counts(archive)
        _print("vectors", f"kill {backend[:6]}", {
            "kills": kills, **after, "missing_after_reindex": again["missing"],
            "wrong_after_reindex": again["wrong_text"]})

    # SQLite: the newest messages forgotten after they were embedded, then new ones appended
    home = tempfile.mkdtemp(prefix="stress-vec-")
    archive = archive_at(None, home)
    for i in range(40):
        archive.append_message("forget", Message(role="user", content=f"plain message {i}"))
    for i in range(5):
        archive.append_message("forget", Message(role="user", content=f"secret plan {i}"))
    _index_all(archive)
    forget_messages(archive, "secret plan")
    for i in range(5):
        archive.append_message("forget", Message(role="user", content=f"later message {i}"))
    _index_all(archive)
    after = vector_counts(archive)
    _reindex(archive)
    _print("vectors", "forget sqlite", {**after,
                                         "missing_after_reindex": vector_counts(archive)["missing"]})

    # PostgreSQL: a long transaction (an import) commits ids far below the indexer's cursor
    _reset_archive(url)
    archive = archive_at(url, None)
    embedder = guarded()

    from memory.session_archive.store import PgSessionArchive

    assert isinstance(archive, PgSessionArchive)
    done = threading.Event()

    def live() -> None:
        from memory.session_archive.vectors import index_batch
        k = 0
        while not done.is_set():
            archive.append_message("live", Message(role="user", content=f"live {k}"))
            index_batch(archive, embedder, 64)
            k += 1

    def bulk(con: Any) -> None:
        num = archive._create_from(con, "bulk")
        for step in range(60):
            archive.db.insert_many(con, "INSERT INTO messages(session, role, content, "
                                   "tool_name, tool_call_id, tool_calls, timestamp, meta) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                   [(num, "user", f"imported {step} {k}", None, None, None,
                                     time.time(), None) for k in range(50)])
            time.sleep(0.01)  # a long import: the live node appends and indexes meanwhile

    t = threading.Thread(target=live, daemon=True)
    t.start()
    archive._write(bulk)
    done.set()
    t.join()
    from memory.session_archive.vectors import VectorIndexer

    indexer = VectorIndexer(archive, embedder, batch=64)  # the background indexer, as serve runs it
    for _ in range(3):  # three wake-ups, each ending when nothing is pending
        indexer.wait_done(120)
    indexer.close()
    after = vector_counts(archive)
    _reindex(archive)
    _print("vectors", "late pg", {**after,
                                   "missing_after_reindex": vector_counts(archive)["missing"]})


def _contents(archive: Any) -> set[tuple[str, str]]:
    rows = archive.db.read("SELECT s.id, m.content FROM messages AS m JOIN sessions AS s "
                           "ON s.num = m.session")
    return {(str(a), str(b)) for a, b in rows}


def attack_migrate(url: str) -> None:
    """``storage migrate`` both ways while a node writes to the source."""
    for direction in ("--to", "--from"):
        _reset_archive(url)
        home = Path(tempfile.mkdtemp(prefix="stress-migrate-"))
        source_url = url if direction == "--from" else None
        source = archive_at(source_url, str(home))
        run = Run()
        run.start("appender", 0, ["--url", url] if source_url else ["--home", str(home)])
        run.wait_begins(0, 300)
        env = {**os.environ, "HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": "",
               "PYTHONPATH": str(ROOT)}  # this tree's hermes-core, whatever is installed
        cmd = [sys.executable, "-m", "hermes_core", "storage", "migrate", direction, url,
               "--json"]
        first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                               cwd=ROOT)
        run.kill(0)
        run.join()
        target = archive_at(None if source_url else url, str(home))
        missing_first = len(_contents(source) - _contents(target))
        again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                               cwd=ROOT)
        missing_again = len(_contents(source) - _contents(target))
        try:
            lines = json.loads(again.stdout).get("plugins", {})
            said = json.dumps(lines)[:0]
        except ValueError:
            said = again.stderr[-200:]
        _print("migrate", direction.strip("-"), {
            "written": len(_contents(source)), "exit": first.returncode,
            "missing_after_first": missing_first, "exit_again": again.returncode,
            "missing_after_rerun": missing_again})
        warn = [ln for ln in (first.stdout + first.stderr).splitlines()
                if "changed" in ln or "still" in ln]
        if warn:
            print("    first run said:", warn[0][:200])
        _ = said


def _reset_archive(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DELETE FROM message_vectors")
        con.execute("DELETE FROM archive_meta")
        con.execute("DELETE FROM messages")
        con.execute("DELETE FROM sessions")


# ------------------------------------------------------------------------------- the driver

class Run:
    """Worker processes whose BEGIN/ACK lines are collected; killed with SIGKILL on demand."""

    def __init__(self) -> None:
        self.logs: list[list[str]] = []
        self.ids: list[int] = []
        self.slots: list[int] = []  # which of the N concurrent writers a process stands for
        self.procs: list[subprocess.Popen[str]] = []
        self._threads: list[threading.Thread] = []

    def start(self, kind: str, worker: int, extra: list[str], slot: int | None = None) -> int:
        cmd = [sys.executable, str(Path(__file__).with_name("stress_workers.py")),
               "--worker-kind", kind, "--worker", str(worker), *extra]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log: list[str] = []
        err: list[str] = []

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.append(line.rstrip("\n"))

        def pump_err() -> None:
            assert proc.stderr is not None
            err.extend(proc.stderr.read().splitlines()[-5:])

        for fn in (pump, pump_err):
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            self._threads.append(t)
        self.logs.append(log)
        self.ids.append(worker)
        self.slots.append(worker if slot is None else slot)
        self.procs.append(proc)
        self.errors = getattr(self, "errors", [])
        self.errors.append(err)
        return len(self.procs) - 1

    def by_worker(self) -> list[list[str]]:
        """Each worker id's log lines, its processes' one after the other."""
        out: dict[int, list[str]] = defaultdict(list)
        for worker, log in zip(self.ids, self.logs, strict=True):
            out[worker] += log
        return list(out.values())

    def wait_begins(self, index: int, count: int, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for line in self.logs[index] if line.startswith("BEGIN")) >= count:
                return True
            if self.procs[index].poll() is not None:
                return False
            time.sleep(0.002)
        return False

    def kill(self, index: int) -> None:
        self.procs[index].send_signal(signal.SIGKILL)
        self.procs[index].wait()

    def join(self) -> None:
        for p in self.procs:
            p.wait()
        for t in self._threads:
            t.join(timeout=10)

    def failures(self) -> list[str]:
        out = []
        for proc, err in zip(self.procs, self.errors, strict=True):
            if proc.returncode not in (0, -signal.SIGKILL):
                out.append(f"exit {proc.returncode}: {' | '.join(err)[-400:]}")
        return out


def _ops(log: list[str]) -> list[tuple[list[str], bool]]:
    """(the BEGIN line's fields, acknowledged?) for each op of one worker's log."""
    out: list[tuple[list[str], bool]] = []
    for line in log:
        if line.startswith("BEGIN"):
            out.append((line.split()[1:], False))
        elif (line == "ACK" or line.startswith("ACK ")) and out:
            out[-1] = (out[-1][0], True)
    return out


def check_memory(url: str | None, home: str | None, logs: list[list[str]]) -> dict[str, int]:
    """Count lost / torn / duplicated entries and history mismatches."""
    expected: dict[str, tuple[str, str, int] | None] = {}  # key -> (owner, target, v) or gone
    maybe: dict[str, set[Any]] = defaultdict(set)  # key -> states an unacknowledged op allows
    acked = 0
    for log in logs:
        for fields, ok in _ops(log):
            op, owner, target, key, v = fields[0], eval(fields[1]), fields[2], fields[3], int(fields[4])
            state = None if op == "remove" else (owner, target, v)
            if ok:
                acked += 1
                expected[key] = state
                maybe.pop(key, None)
            else:
                maybe[key] = {expected.get(key), state}
    found: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    torn = over = history_bad = 0
    for owner in OWNERS:
        store = memory_store(url, home, owner)
        for target in ("memory", "user"):
            state = store.read(target)
            if state.problem:
                torn += 1
            text = (state.raw or b"").decode("utf-8")
            if len(text.rstrip("\n")) > store.limit(target):
                over += 1
            for entry in state.entries:
                m = ENTRY.match(entry)
                if m is None:
                    torn += 1
                    continue
                found[m.group(1)].append((owner, target, int(m.group(2))))
        history_bad += _history_mismatches(store)
    lost = dup = wrong = 0
    for key in set(expected) | set(found):
        got = found.get(key, [])
        if len(got) > 1:
            dup += 1
        now = got[0] if got else None
        if key in maybe:
            if now not in maybe[key]:
                wrong += 1
        elif expected.get(key) != now:
            if now is None:
                lost += 1
            else:
                wrong += 1
    return {"acknowledged": acked, "lost": lost, "wrong_version": wrong, "dup": dup,
            "torn": torn, "over_limit": over, "history_mismatch": history_bad}


def _history_mismatches(store: Any) -> int:
    """Versions whose ``before`` is not the previous ``after``, numbers not increasing by one,
    and documents that differ from the newest version's ``after``."""
    history = store.history
    if history is None:
        return 0
    bad = 0
    running: dict[str, str | None] = {}
    last = None
    for version in history.read():
        if last is not None and version.version != last + 1:
            bad += 1
        last = version.version
        for target, texts in version.stores.items():
            # an emptied document: "" and None both mean "no entries"
            if ("before" in texts and target in running
                    and (texts["before"] or None) != (running[target] or None)):
                bad += 1
            running[target] = texts.get("after")
    for target, text in running.items():
        now = store.read(target).raw
        if (now.decode("utf-8") if now else None) != (text or None):
            bad += 1
    return bad


def _history_detail(store: Any) -> str:
    versions = store.history.read()
    tail = versions[-1]
    now = {t: (store.read(t).raw or b"").decode() for t in ("memory", "user")}
    return (f"last version {tail.version} {tail.action} {json.dumps(tail.stores)[:300]} "
            f"documents {json.dumps(now)[:300]}")


def attack_memory(url: str, workers: int, ops: int, kills: int) -> None:
    """Concurrent ops, then ops under SIGKILL, on three owners at once."""
    for phase, kill_count in (("concurrent", 0), ("kill -9", kills)):
        _reset_memory(url)
        run = Run()
        per = ops // workers
        for w in range(workers):
            run.start("memory", w, ["--url", url, "--ops", str(per), "--seed", str(w)])
        next_id = workers
        rng = random.Random(7)
        done_kills = 0
        for victim in _kills(run, kill_count, rng, most_begins=4, jitter=0.004):
            done_kills += 1
            worker = run.ids[victim]
            left = max(10, per - sum(_begins(run, i) for i, w in enumerate(run.ids) if w == worker))
            run.start("memory", worker, ["--url", url, "--ops", str(left), "--seed",
                                         str(next_id), "--start", str(next_id * 1000)])
            next_id += 1
        run.join()
        counts = check_memory(url, None, run.by_worker())
        counts["kills"] = done_kills
        counts["worker_errors"] = len(run.failures())
        _print("memory", phase, counts)
        for f in run.failures()[:3]:
            print("   ", f)


def _begins(run: Run, index: int) -> int:
    return sum(1 for line in run.logs[index] if line.startswith("BEGIN"))


def _kills(run: Run, count: int, rng: random.Random, *, most_begins: int,
           jitter: float) -> Iterator[int]:
    """SIGKILL a random live worker ``count`` times, each 1..``most_begins`` operations after
    its last one began and up to ``jitter`` s into it (anywhere inside a write); yields each
    victim's index (the caller starts its replacement)."""
    done = 0
    while done < count:
        alive = [i for i, p in enumerate(run.procs) if p.poll() is None]
        if not alive:
            return
        victim = rng.choice(alive)
        if not run.wait_begins(victim, rng.randint(1, most_begins) + _begins(run, victim)):
            continue
        time.sleep(rng.random() * jitter)
        run.kill(victim)
        done += 1
        yield victim


def _reset_memory(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        for table in ("memory_documents", "memory_versions", "memory_history_heads"):
            con.execute(f"DELETE FROM {table}")


def attack_archive(url: str, workers: int, appends: int, kills: int) -> None:
    import psycopg

    for phase, kill_count in (("concurrent", 0), ("kill -9", kills)):
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("DELETE FROM messages")
            con.execute("DELETE FROM sessions")
        run = Run()
        per = appends // workers
        for w in range(workers):
            run.start("archive", w, ["--url", url, "--ops", str(per), "--seed", str(w)])
        rng = random.Random(11)
        next_id = workers
        done_kills = 0
        for victim in _kills(run, kill_count, rng, most_begins=20, jitter=0.003):
            done_kills += 1
            slot = run.slots[victim]
            left = max(20, per - sum(_begins(run, i) for i, s in enumerate(run.slots)
                                     if s == slot))
            run.start("archive", next_id, ["--url", url, "--ops", str(left), "--seed",
                                           str(next_id)], slot=slot)
            next_id += 1
        run.join()
        counts = check_archive(url, run.logs)
        counts["kills"] = done_kills
        counts["worker_errors"] = len(run.failures())
        _print("archive", phase, counts)
        for f in run.failures()[:3]:
            print("   ", f)


def check_archive(url: str, logs: list[list[str]]) -> dict[str, int]:
    import psycopg

    acked: set[str] = set()
    maybe: set[str] = set()
    for log in logs:
        for fields, ok in _ops(log):
            content = " ".join(fields[1:])
            (acked if ok else maybe).add(content)
    with psycopg.connect(url, autocommit=True) as con:
        rows = con.execute("SELECT s.id, m.id, m.content FROM messages m JOIN sessions s "
                           "ON s.num = m.session ORDER BY m.id").fetchall()
        sessions = con.execute(
            "SELECT s.id, s.message_count, s.input_tokens, s.api_calls, "
            "(SELECT count(*) FROM messages m WHERE m.session = s.num) FROM sessions s").fetchall()
    seen: dict[str, int] = defaultdict(int)
    order_bad = 0
    last: dict[tuple[str, str], int] = {}
    tokens: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    for sid, _mid, content in rows:
        seen[content] += 1
        w, n, t = content.split()
        key = (sid, w)
        if last.get(key, -1) >= int(n[1:]):
            order_bad += 1
        last[key] = int(n[1:])
        tokens[sid] += int(t[1:])
        calls[sid] += 1 if int(t[1:]) else 0
    lost = sum(1 for c in acked if seen.get(c, 0) == 0)
    dup = sum(1 for c, k in seen.items() if k > 1)
    unknown = sum(1 for c in seen if c not in acked and c not in maybe)
    count_bad = sum(1 for s in sessions if s[1] != s[4])
    token_bad = sum(1 for s in sessions if s[2] != tokens[s[0]] or s[3] != calls[s[0]])
    return {"acknowledged": len(acked), "rows": len(rows), "lost": lost, "dup": dup,
            "unknown": unknown, "out_of_order": order_bad, "message_count_wrong": count_bad,
            "tokens_wrong": token_bad}


def attack_revert(url: str | None, kills: int) -> None:
    """Rollbacks under SIGKILL: documents must equal what the newest version says."""
    home = tempfile.mkdtemp(prefix="stress-revert-")
    if url:
        _reset_memory(url)
    rng = random.Random(5)
    bad = rollbacks = 0
    args = ["--url", url] if url else ["--home", home]
    for i in range(kills):
        run = Run()
        run.start("revert", i, [*args, "--seed", str(i)])
        if not run.wait_begins(0, rng.randint(1, 3)):
            print("    worker ended:", run.failures())
            break
        time.sleep(rng.random() * 0.01)
        run.kill(0)
        run.join()
        rollbacks += _begins(run, 0)
        store = memory_store(url, home, "")
        found = _history_mismatches(store)
        if found and os.environ.get("STRESS_DEBUG"):
            print("    mismatch after kill", i, _history_detail(store))
        bad += 1 if found else 0
    _print("revert", "postgresql" if url else "files",
           {"kills": kills, "changes_begun": rollbacks, "states_not_matching_history": bad})


def _print(area: str, phase: str, counts: dict[str, int]) -> None:
    print(f"{area:8} {phase:12} " + " ".join(f"{k}={v}" for k, v in counts.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="memory,archive,revert,lossless,vectors,migrate")
    parser.add_argument("--quick", action="store_true", help="a tenth of the ops and kills")
    args = parser.parse_args()
    from hermes_core.testing.postgres import temp_postgres

    scale = 10 if args.quick else 1
    only = set(args.only.split(","))
    print(f"load: {os.getloadavg()[0]:.2f}", flush=True)
    with temp_postgres() as pg:
        url = pg.url
        memory_store(url, None, "")  # migrate once before the workers race
        from memory.session_archive.store import PgSessionArchive

        from hermes_core.storage import parse_storage_url

        PgSessionArchive(parse_storage_url(url))
        if "memory" in only:
            attack_memory(url, 4, 4000 // scale, 200 // scale)
        if "archive" in only:
            attack_archive(url, 4, 8000 // scale, 60 // scale)
        if "revert" in only:
            attack_revert(url, 60 // scale)
            attack_revert(None, 60 // scale)
        if "lossless" in only:
            attack_lossless(url, 60 // scale)
        if "vectors" in only:
            attack_vectors(url, 40 // scale)
        if "migrate" in only:
            attack_migrate(url)
    _ = json


if __name__ == "__main__":
    main()
