"""Session archive benchmark: appends, size on disk, search and session_search latency.

Same method as reference/perf-baseline.md section 1: a seeded corpus (session_corpus.py: 20k-word
Zipf vocabulary, ~40-message sessions with tool calls, mixed lengths, ~3% CJK) is bulk-loaded
through the real schema and triggers (one transaction per session), then the live append path is
measured on top of it, one message per transaction, as the agent appends. Percentiles are nearest
rank; every figure is printed with its ratio to the target (ratio <= 1.0 means the target is met;
for throughput the ratio is target / measured). Nothing here asserts: the machine is shared.

    python bench/bench_session_archive.py                       # 10k and 100k messages
    python bench/bench_session_archive.py --sizes 10000,100000,1000000 --dir /tmp/sa-bench
    python bench/bench_session_archive.py --backend both    # SQLite and PostgreSQL, one run

``--backend postgresql`` (or ``both``) starts a throwaway PostgreSQL server (hermes_core.testing
.postgres; Debian's server package) unless ``--url`` names a database to fill. That server is
durable, as a production one is (fsync, full page writes and synchronous commit on, like the
SQLite archive's synchronous=FULL), with ``shared_buffers`` of 2 GB (a 1M-message archive takes
1.2 GB: the buffer cache holds it, as a server sized for it would; PostgreSQL's own default of
128 MB is meant to be raised);
``--pg-setting name=value`` changes one (repeatable). With ``--url`` and ``--reuse``, a database
that already holds the messages (filled by an earlier run with the same ``--url``) is measured
as it is, so a 1M archive is loaded once (about 9 minutes with the durable server):

    python bench/bench_session_archive.py --backend postgresql --sizes 1000000 \
        --writer-appends 0 --url postgresql://USER:PASSWORD@127.0.0.1:PORT/bench --reuse

    python bench/bench_session_archive.py --sizes '' --writer-appends 3000   # writers only

The concurrent-writers run starts 1, then 4 processes appending to one state.db at once and prints
the append latency percentiles (target: p99.9 <= 250 ms with 4 writers), with and without the
write gate (session_archive/db.py's WriteGate) side by side.

``--embedder`` adds the semantic search figures of bench_archive_semantic.py (the local model's
memory and indexing rate, vectors per message, hybrid query p50/p95, payload); ``--reuse`` keeps
and reuses a database built by an earlier run (``--dir``), so a 1M archive is built once:

    python bench/bench_session_archive.py --sizes 100000,1000000 --dir /tmp/sa --reuse --embedder

At 1M messages the bulk load takes about 3 minutes on the project's 2-vCPU machine and the whole
run about 5; the database needs ~0.7 GB in --dir (deleted afterwards unless --keep).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from session_corpus import Corpus, QuerySet

from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.plugins.memory.session_archive.tool import session_search
from hermes_core.types import Message

#: (label, target, unit, lower_is_better); targets of issue 4, meant for 1M messages
TARGETS = {
    "append_p50": (0.45, "ms", True),
    "append_p999": (50.0, "ms", True),
    "append_rate": (1000.0, "msg/s", False),
    "bytes_per_msg": (1000.0, "B", True),
    "search_p50": (3.0, "ms", True),
    "search_p95": (20.0, "ms", True),
    "cjk_long_p50": (3.0, "ms", True),
    "cjk_long_p95": (20.0, "ms", True),
    "cjk_short_p50": (20.0, "ms", True),
    "cjk_short_p95": (20.0, "ms", True),
    "tool_p95": (40.0, "ms", True),
}
HERMES_1M = {"append_p50": 0.38, "append_rate": 64, "bytes_per_msg": 2709, "search_p50": 6.3,
             "search_p95": 93, "cjk_long_p50": 5.6, "cjk_long_p95": 8.6, "cjk_short_p50": 409,
             "cjk_short_p95": 454, "tool_p95": 121}


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


Opener = Callable[..., SessionArchive]


def load(open_: Opener, corpus: Corpus, n: int) -> tuple[float, list[Message], int]:
    """Bulk-load ``n`` messages; return (msgs/s, the first 10k messages, next session index)."""
    sample: list[Message] = []
    done = 0
    index = 0
    start = time.perf_counter()
    with open_(synchronous="normal") as archive:
        for index, (sid, msgs) in enumerate(corpus.sessions()):  # noqa: B007
            if done >= n:
                break
            msgs = msgs[: n - done]
            archive.append_messages(sid, msgs)
            done += len(msgs)
            if len(sample) < 10_000:
                sample.extend(msgs)
    return done / (time.perf_counter() - start), sample[:10_000], index


def live_appends(
    open_: Opener, corpus: Corpus, first: int, count: int, synchronous: str
) -> tuple[list[float], float]:
    """Append ``count`` messages one by one; return (latencies ms, msgs/s)."""
    latencies: list[float] = []
    start = time.perf_counter()
    with open_(synchronous=synchronous) as archive:
        for sid, msgs in corpus.sessions(first):
            for m in msgs:
                t = time.perf_counter()
                archive.append_message(sid, m)
                latencies.append((time.perf_counter() - t) * 1000)
                if len(latencies) >= count:
                    return latencies, count / (time.perf_counter() - start)
    raise AssertionError("unreachable: the corpus is endless")


#: issue 17 item 12: append p99.9 with 4 writer processes on one state.db
WRITERS_TARGET_P999_MS = 250.0


def _writer(path: str, wid: int, count: int, gate: bool, start: Any, out: Any) -> None:
    """One writer process: ``count`` appends to its own session, as fast as it can."""
    from hermes_core.plugins.memory.session_archive import db as db_module

    if not gate:  # the "before" figure: SQLite's busy handler alone
        db_module.WriteGate = lambda _path: None  # type: ignore[assignment,misc]  # no gate
    corpus = Corpus(seed=1000 + wid)
    messages = [m for _sid, msgs in itertools.islice(corpus.sessions(), 200) for m in msgs]
    latencies: list[float] = []
    with SessionArchive(path) as archive:
        archive.append_message(f"writer-{wid}", messages[0])
        start.wait()
        for i in range(count):
            t = time.perf_counter()
            archive.append_message(f"writer-{wid}", messages[i % len(messages)])
            latencies.append((time.perf_counter() - t) * 1000)
    out.put(latencies)


def multi_writer(root: Path, writers: int, count: int, *, gate: bool = True) -> list[float]:
    """Append latencies (ms) of ``writers`` processes appending ``count`` messages each at once."""
    import multiprocessing

    path = root / f"writers-{writers}-{int(gate)}.db"
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    SessionArchive(path).close()  # schema first, so no writer measures the creation
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), w, count, gate, start, out))
             for w in range(writers)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # let every writer import and open the archive
    start.set()
    latencies = [x for _ in procs for x in out.get()]
    for proc in procs:
        proc.join()
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return latencies


def report_writers(root: Path, count: int) -> None:
    print(f"\n== concurrent writers on one state.db ({count:,} appends each, synchronous=full, "
          "each process as fast as it can)")
    for writers, gate in ((1, True), (4, True), (4, False)):
        lat = multi_writer(root, writers, count, gate=gate)
        p999 = pct(lat, 0.999)
        how = "write gate (default)" if gate else "SQLite busy handler only (before)"
        print(f"  {writers} writer(s), {how:<34}: p50 {pct(lat, .5):.2f} p99 {pct(lat, .99):.1f} "
              f"p99.9 {p999:.1f} max {max(lat):.1f} ms; p99.9 ratio to the {WRITERS_TARGET_P999_MS:g}"
              f" ms target {p999 / WRITERS_TARGET_P999_MS:.2f}")


def breakdown(path: Path, total: int) -> list[tuple[str, float]]:
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        return [(name, size / total) for name, size in rows.fetchall()[:6]]
    except sqlite3.OperationalError:  # SQLite built without dbstat
        return []
    finally:
        con.close()


def searches(open_: Opener, queries: QuerySet, rounds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open_() as archive:
        current = archive.list_sessions(limit=1)[0].id
        for q in queries.plain[:5]:  # warm the page cache the way a just-written file is
            search_messages(archive, q)
        for key, qs in (("search", queries.plain), ("cjk_long", queries.cjk_long),
                        ("cjk_short", queries.cjk_short)):
            times: list[float] = []
            found = 0
            for _ in range(rounds):
                for q in qs:
                    hits: list[int] = []
                    times.append(timed(lambda q=q, h=hits: h.extend(
                        x.message_id for x in search_messages(archive, q).hits)))
                    found += bool(hits)
            out[f"{key}_p50"], out[f"{key}_p95"] = pct(times, 0.5), pct(times, 0.95)
            out[f"{key}_found"] = found / (rounds * len(qs))
        times = []
        for _ in range(rounds):
            for q in queries.plain:
                times.append(timed(lambda q=q: session_search(archive, q,
                                                              current_session_id=current)))
        out["tool_p50"], out["tool_p95"] = pct(times, 0.5), pct(times, 0.95)
        out["tool_recent"] = statistics.median(
            timed(lambda: session_search(archive, "", current_session_id=current))
            for _ in range(20))
    return out


def show(key: str, value: float, note: str = "") -> None:
    target, unit, lower = TARGETS[key]
    ratio = value / target if lower else target / max(value, 1e-9)
    mark = "ok " if ratio <= 1.0 else "MISS"
    hermes = f"  (Hermes at 1M: {HERMES_1M[key]} {unit})" if key in HERMES_1M else ""
    print(f"  {mark} {key:<15} {value:>10.3f} {unit:<6} target {'<=' if lower else '>='} "
          f"{target:g} {unit}  ratio {ratio:.2f}{hermes}{note}")


def run(n: int, root: Path, appends: int, rounds: int, keep: bool, *, reuse: bool = False,
        embedder: bool = False, lexical: bool = True) -> None:
    path = root / f"state-{n}.db"
    corpus = Corpus()
    print(f"\n== SQLite, {n:,} messages ({path})")

    def open_(**kwargs: str) -> SessionArchive:
        return SessionArchive(path, **kwargs)  # type: ignore[arg-type]

    if reuse and path.exists():
        sample = [m for _s, msgs in itertools.islice(corpus.sessions(), 400) for m in msgs][:10_000]
        with open_() as archive:
            next_session = archive.db.read("SELECT count(*) FROM sessions")[0][0] + 10_000
        print(f"  reusing {path} (no bulk load)")
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        rate, sample, next_session = load(open_, corpus, n)
        print(f"  bulk load through schema and triggers: {rate:,.0f} msg/s")
    queries = corpus.queries(sample)
    if lexical:
        run_lexical(open_, corpus, path, next_session, queries, appends, rounds)
    if embedder:
        print("  -- with the local embedder (bench_archive_semantic.py)")
        semantic_figures(lambda: SessionArchive(path), sample, queries, rounds)
    if not keep and not reuse:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def run_lexical(open_: Opener, corpus: Corpus, path: Path, next_session: int, queries: QuerySet,
                appends: int, rounds: int) -> None:
    """Appends, size on disk and word search (the figures of the table in the docs)."""
    from hermes_core.plugins.memory.session_archive import SessionArchiveConfig

    default = SessionArchiveConfig().synchronous
    for offset, mode in enumerate(("full", "normal")):
        lat, steady = live_appends(open_, corpus, next_session + 1000 * offset, appends, mode)
        label = "the default" if mode == default else "the other setting"
        print(f"  live appends ({appends:,}, synchronous={mode}, {label}): p50 "
              f"{pct(lat, .5):.3f} p99 {pct(lat, .99):.2f} p99.9 {pct(lat, .999):.2f} "
              f"max {max(lat):.1f} ms")
        show("append_p50", pct(lat, 0.5))
        show("append_p999", pct(lat, 0.999))
        show("append_rate", steady)
    with SessionArchive(path) as archive:
        total = archive.count_messages()
    size = os.path.getsize(path)  # after close: the WAL was checkpointed and truncated
    show("bytes_per_msg", size / total, f"  [{size / 1e6:.1f} MB for {total:,} messages]")
    parts = breakdown(path, total)
    if parts:
        print("  by object: " + ", ".join(f"{name} {b:.0f} B" for name, b in parts))
    report_searches(searches(open_, queries, rounds))


def report_searches(figures: dict[str, float]) -> None:
    for key in ("search_p50", "search_p95", "cjk_long_p50", "cjk_long_p95", "cjk_short_p50",
                "cjk_short_p95", "tool_p95"):
        show(key, figures[key])
    print(f"  queries with at least one hit: plain {figures['search_found']:.0%}, CJK 3+ "
          f"{figures['cjk_long_found']:.0%}, CJK 1-2 {figures['cjk_short_found']:.0%}; "
          f"session_search p50 {figures['tool_p50']:.2f} ms, recent-sessions mode "
          f"{figures['tool_recent']:.2f} ms")


def run_pg(n: int, url: str, appends: int, rounds: int, *, embedder: bool = False,
           reuse: bool = False) -> None:
    """The same measurements on the PostgreSQL archive (a fresh database at ``url``; with
    ``reuse``, a database at ``url`` that already holds ``n`` messages is measured as it is)."""
    from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
    from hermes_core.storage import parse_storage_url

    parsed = parse_storage_url(url)
    corpus = Corpus()
    print(f"\n== PostgreSQL, {n:,} messages ({parsed.redacted})")

    def open_(**_: str) -> SessionArchive:
        return PgSessionArchive(parsed)

    with PgSessionArchive(parsed) as existing:
        held = existing.count_messages()
        sessions = int(existing.db.read("SELECT count(*) FROM sessions")[0][0])
    if reuse and held >= n:
        sample = [m for _s, msgs in itertools.islice(corpus.sessions(), 400) for m in msgs][:10_000]
        # past the sessions of the bulk load and of earlier runs' live appends
        next_session = sessions + 10_000
        print(f"  reusing the database ({held:,} messages, no bulk load)")
        run_pg_measure(parsed, sample, next_session, appends, rounds, embedder=embedder)
        return
    if held:
        raise SystemExit(f"{parsed.redacted} already holds {held:,} messages: pass --reuse to "
                         "measure it as it is, or name an empty database")
    rate, sample, next_session = load(open_, corpus, n)
    print(f"  bulk load through schema and triggers: {rate:,.0f} msg/s")
    # what autovacuum does within about a minute of a bulk load: without statistics the planner
    # picks sequential scans, and without the visibility map index-only reads visit the table,
    # which is not the state a serving database is in
    with PgSessionArchive(parsed) as fresh:
        fresh.db.write_one("VACUUM (ANALYZE) messages, sessions")
    print("  VACUUM (ANALYZE) messages, sessions after the bulk load (as autovacuum would)")
    run_pg_measure(parsed, sample, next_session, appends, rounds, embedder=embedder)


def run_pg_measure(parsed: Any, sample: list[Message], next_session: int, appends: int,
                   rounds: int, *, embedder: bool = False) -> None:
    """Appends, size and search figures of the PostgreSQL archive ``parsed`` names."""
    from hermes_core.plugins.memory.session_archive.store import PgSessionArchive

    corpus = Corpus()

    def open_(**_: str) -> SessionArchive:
        return PgSessionArchive(parsed)

    queries = corpus.queries(sample)
    lat, steady = live_appends(open_, corpus, next_session, appends, "full")
    print(f"  live appends ({appends:,}, one transaction each): p50 {pct(lat, .5):.3f} p99 "
          f"{pct(lat, .99):.2f} p99.9 {pct(lat, .999):.2f} max {max(lat):.1f} ms")
    show("append_p50", pct(lat, 0.5))
    show("append_p999", pct(lat, 0.999))
    show("append_rate", steady)
    archive = PgSessionArchive(parsed)
    total = archive.count_messages()
    size = sum(int(archive.db.read(f"SELECT pg_total_relation_size('{t}')")[0][0])
               for t in ("messages", "sessions"))
    show("bytes_per_msg", size / total, f"  [{size / 1e6:.1f} MB for {total:,} messages, "
         "tables and indexes]")
    parts = archive.db.read(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class AS c WHERE c.relname IN "
        "('messages', 'sessions') OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid "
        "IN ('messages'::regclass, 'sessions'::regclass)) OR c.oid IN (SELECT reltoastrelid "
        "FROM pg_class WHERE relname IN ('messages', 'sessions')) ORDER BY 2 DESC")
    print("  by relation: " + ", ".join(
        f"{'TOAST' if name.startswith('pg_toast') else name} {int(b) / total:.0f} B"
        for name, b in parts[:8]))
    report_searches(searches(open_, queries, rounds))
    archive.close()
    if embedder:
        print("  -- with the local embedder (bench_archive_semantic.py)")
        semantic_figures(lambda: PgSessionArchive(parsed), sample, queries, rounds)


def semantic_figures(open_: Callable[[], SessionArchive], sample: list[Message],
                     queries: QuerySet, rounds: int) -> None:
    """The hybrid search figures of bench_archive_semantic.py on the archive ``open_`` opens."""
    from bench_archive_semantic import appends_side_by_side, model_figures, run_semantic

    from hermes_core.embeddings import GuardedEmbedder
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder

    guarded = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=3600)
    texts = [m.content[:2000] for m in sample if m.role in ("user", "assistant")
             and m.content][:64]
    model_figures(guarded, texts)
    appends_side_by_side(open_, guarded, sample[:2000])
    run_semantic(open_, queries.plain, guarded, rounds)


#: the throwaway server's settings: durable, with a buffer cache sized for the archive
PG_SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on",
               "shared_buffers": "2GB"}


def pg_settings(overrides: list[str]) -> dict[str, str]:
    settings = dict(PG_SETTINGS)
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--pg-setting {item!r}: expected NAME=VALUE, e.g. shared_buffers=2GB")
        settings[name.strip()] = value.strip()
    return settings


def run_backends(args: argparse.Namespace, sizes: list[int], root: Path) -> None:
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    server = None
    try:
        if "postgresql" in backends and not args.url:
            from hermes_core.testing.postgres import temp_postgres

            server = temp_postgres(pg_settings(args.pg_setting))
            pg = server.__enter__()
        for n in sizes:
            if "sqlite" in backends:
                run(n, root, args.appends, args.rounds, args.keep, reuse=args.reuse,
                    embedder=args.embedder, lexical=not args.semantic_only)
            if "postgresql" in backends:
                url = args.url or pg.create_database(f"bench_{n}")
                run_pg(n, url, args.appends, args.rounds, embedder=args.embedder,
                       reuse=args.reuse and bool(args.url))
                if not args.url:
                    from hermes_core.storage import close_pools

                    close_pools()
                    pg.drop_database(f"bench_{n}")
    finally:
        if server is not None:
            server.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated corpus sizes in messages (default 10000,100000)")
    parser.add_argument("--appends", type=int, default=5000, help="live appends measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the query set")
    parser.add_argument("--dir", help="where the databases go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--reuse", action="store_true", help="reuse state-N.db in --dir when it "
                        "exists (no bulk load; kept afterwards); with --url, measure a "
                        "PostgreSQL database that already holds the messages as it is")
    parser.add_argument("--semantic-only", action="store_true", help="with --embedder: skip the "
                        "append and word-search figures")
    parser.add_argument("--embedder", action="store_true", help="also measure hybrid search with "
                        "the local embedder (bench_archive_semantic.py)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the throwaway PostgreSQL server (repeatable; see "
                             "the module doc for the defaults)")
    parser.add_argument("--url", help="a PostgreSQL database to fill (default: a throwaway "
                        "server); only with one size")
    parser.add_argument("--writer-appends", type=int, default=3000,
                        help="appends per process in the concurrent-writers run (0: skip it)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sa-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}; targets are for 1M "
          "messages, ratios at smaller sizes are for reference")
    try:
        if args.writer_appends:
            report_writers(root, args.writer_appends)
        run_backends(args, sizes, root)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
