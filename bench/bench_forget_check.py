"""The cost of the forget check per turn: reading the stores' erasure generation.

    python bench/bench_forget_check.py [--reads 20000] [--url postgresql://...]

Before each turn a running server reads the erasure generation (``PluginHost.heed_erasures``:
one read of one row) to learn of a ``forget``, ``memory rollback`` or ``sessions delete`` made by
another process. Measured: the whole check as a turn pays it (the host's method, its few-ms reuse
window turned off so that every call reads the store), on SQLite (``erasures.db`` in a temporary
home, after one erasure so that the file exists) and on PostgreSQL (a throwaway server on this
machine unless ``--url`` is given; the reader LISTENs for the notification each erasure sends,
so a check polls its socket and reads the row only after a notification or every few seconds).
Printed: median and p95 microseconds per check, and the ratio
to the target.

Target: < 0.5 ms per turn (ratio = 500 us / p95; >= 1.0 means met). Nothing asserts.

Also printed: the cost the session archive adds to each stored message (reading the erasure log's
notes newer than its conversation's mark, see ``hermes_core.storage.erasure_log``), with one
pending note so that the text is checked too.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TARGET_US = 500.0


def measure(home: Path, storage_url: str | None, reads: int) -> list[float]:
    """Microseconds per check, one sample per read."""
    from hermes_core import host as host_module
    from hermes_core.host import PluginHost
    from hermes_core.storage.erasures import record_erasure

    text = "memory:\n  providers: []\n"
    if storage_url:
        text += f"storage:\n  url: {storage_url}\n"
    (home / "config.yaml").write_text(text, encoding="utf-8")
    os.environ["HERMES_CORE_HOME"] = str(home)
    record_erasure("forget", home=home, storage_url=storage_url, config_url=False)
    host_module._ERASURES_FRESH = 0.0  # every call reads the store, as the first check of a turn
    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False)
    try:
        for _ in range(200):  # warm: the connection, the statement
            host.heed_erasures()
        samples = []
        for _ in range(reads):
            began = time.perf_counter()
            host.heed_erasures()
            samples.append((time.perf_counter() - began) * 1e6)
        return samples
    finally:
        host.shutdown()


def measure_log(home: Path, storage_url: str | None, reads: int, pending: bool) -> list[float]:
    """Microseconds per read of the erasure log after a message is archived: nothing noted since
    the conversation's mark (the usual case), or one note of another subject (a conversation
    loaded before a forget, until it is rebuilt)."""
    from hermes_core.storage import resolve_storage_url
    from hermes_core.storage.erasure_log import ErasureLog

    log = ErasureLog(home, resolve_storage_url(storage_url))
    mark = log.note("forget", "a subject nobody wrote", "all") - (1 if pending else 0)
    try:
        for _ in range(200):
            log.since(mark)
        samples = []
        for _ in range(reads):
            began = time.perf_counter()
            for note in log.since(mark):
                note.find_in("an answer of a few hundred characters " * 8)
            samples.append((time.perf_counter() - began) * 1e6)
        return samples
    finally:
        log.close()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str | None]:
    if url:
        yield url
        return
    try:
        from hermes_core.testing.postgres import PostgresUnavailable, temp_postgres
    except ImportError:
        yield None
        return
    try:
        with temp_postgres() as server:
            yield server.url
    except PostgresUnavailable as exc:
        print(f"(PostgreSQL skipped: {exc})")
        yield None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reads", type=int, default=20000)
    parser.add_argument("--url", help="a PostgreSQL database (default: a throwaway server)")
    args = parser.parse_args()
    rows, writes = [], []
    with tempfile.TemporaryDirectory(prefix="hermes-bench-erasure-") as tmp:
        (Path(tmp) / "sqlite").mkdir()
        rows.append(("SQLite (erasures.db)", measure(Path(tmp) / "sqlite", None, args.reads)))
        for pending in (False, True):
            writes.append((f"SQLite, {'1 note' if pending else 'no note'}",
                           measure_log(Path(tmp) / "sqlite", None, args.reads // 10, pending)))
        with database(args.url) as url:
            if url:
                (Path(tmp) / "pg").mkdir()
                rows.append(("PostgreSQL (loopback)",
                             measure(Path(tmp) / "pg", url, max(1000, args.reads // 10))))
                for pending in (False, True):
                    writes.append((f"PostgreSQL, {'1 note' if pending else 'no note'}",
                                   measure_log(Path(tmp) / "pg", url,
                                               max(1000, args.reads // 10), pending)))
    print(f"forget check per turn (PluginHost.heed_erasures, a store read every call); "
          f"target < {TARGET_US:.0f} us")
    show(rows)
    print("erasure log check per archived message (a read of the notes; a note is checked "
          "against 300 characters); no target, for reference")
    show(writes, ratio=False)


def show(rows: list[tuple[str, list[float]]], ratio: bool = True) -> None:
    for name, samples in rows:
        high = p95(samples)
        print(f"  {name:22s} median {statistics.median(samples):7.1f} us   p95 {high:7.1f} us   "
              f"({len(samples)} reads)" + (f"   ratio {TARGET_US / high:.1f}" if ratio else ""))


if __name__ == "__main__":
    main()
