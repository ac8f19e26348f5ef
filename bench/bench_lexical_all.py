"""Does the archive's word search rank every match? Agreement, old-message recall and latency.

One archive: ``--old`` older messages (sessions of the benchmark corpus far from the others,
same vocabulary) under ``--size`` newer ones (bench/session_corpus.py). Three figures, on SQLite
and (with ``--backend both``) on a throwaway PostgreSQL server:

* **agreement**: for the corpus's 50 queries, the top 10 of ``search_messages`` against a
  reference computed here: every match of the same expression (the try that matched: all
  words, then words, then any word) scored and sorted in Python (BM25 with the archive's column
  weights on SQLite, ``ts_rank_cd`` on PostgreSQL), ties newest first. Mean top-10 overlap and
  the queries whose top 10 differ;
* **old-message recall**: ``--questions`` exact-word questions about older messages: four of a
  target message's mid-frequency words and one word it lacks (so no message holds all of them
  and the search falls back to any word); recall@3 of the target;
* **latency** (SQLite): ``search_messages`` (default limit 20: ranking, echo check, snippets and
  neighbours) against a Hermes-style single FTS5 statement (``ORDER BY rank LIMIT 20`` with a
  snippet, joined to the messages) on a Hermes-schema copy of the same messages (one unicode61
  column over content, tool name and tool calls), A B A B, p50/p95 and their ratio; also the
  SQL statements per search. With hermes-agent 0.19.0 installed (``pip install
  hermes-agent==0.19.0``), also against Hermes' own search, ``hermes_state.SessionDB.
  search_messages`` (a snippet, the session's source and model, and one message of context
  before and after each of 20 hits: what ``search_messages`` here returns), on a state.db made
  by Hermes' own schema and triggers from the same messages.

``--before REV`` adds the search as it was at a git revision (search.py read with ``git show``
and loaded beside the current one; at a revision that had it, pg_search.py too) to every
figure.

    python bench/bench_lexical_all.py --before db452c2 --backend both --dir /tmp/lex --reuse
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from revision import module_at
from session_corpus import Corpus

from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive import search as current
from hermes_core.types import Message

#: the row of Hermes Agent 0.19.0's own search (hermes_state.SessionDB.search_messages)
AGENT = "Hermes 0.19.0 search_messages"
#: where the older sessions are drawn from (session indexes no newer session reaches)
OLD_START = 10_000_000
_WORD = re.compile(r"[a-z]+")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(p * len(ordered) + 0.999999) - 1)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def messages(corpus: Corpus, start: int, n: int) -> list[tuple[str, list[Message]]]:
    out, done = [], 0
    for sid, msgs in corpus.sessions(start):
        if done >= n:
            break
        out.append((sid, msgs[: n - done]))
        done += len(out[-1][1])
    return out


def fill(archive: SessionArchive, corpus: Corpus, old: int, new: int) -> None:
    for part in (messages(corpus, OLD_START, old), messages(corpus, 0, new)):
        for sid, msgs in part:
            archive.append_messages(sid, msgs)


def hermes_copy(archive: SessionArchive, path: Path) -> sqlite3.Connection:
    """The same messages (same ids) in a Hermes-style schema: one contentful unicode61 FTS5
    column over content, tool name and tool calls."""
    fresh = not path.exists()
    con = sqlite3.connect(path)
    if fresh:
        con.executescript(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
            "content TEXT, tool_name TEXT, tool_calls TEXT, timestamp REAL);"
            "CREATE VIRTUAL TABLE messages_fts USING fts5(content);")
        rows = archive.db.read("SELECT m.id, s.id, m.role, m.content, m.tool_name, m.tool_calls, "
                               "m.timestamp FROM messages AS m JOIN sessions AS s "
                               "ON s.num = m.session ORDER BY m.id")
        with con:
            con.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            con.executemany("INSERT INTO messages_fts(rowid, content) VALUES (?, ?)",
                            [(r[0], " ".join(x or "" for x in (r[3], r[4], r[5]))) for r in rows])
    return con


def hermes_agent_db(archive: SessionArchive, path: Path) -> Any | None:
    """Hermes Agent's own ``SessionDB`` (``hermes_state``, when hermes-agent 0.19.0 is installed)
    over the same messages (same ids), made by its own schema and triggers; None without it."""
    try:
        from hermes_state import SessionDB
    except ImportError:
        return None
    fresh = not path.exists()
    SessionDB(db_path=path).close()  # its schema, FTS tables and triggers
    if fresh:
        sessions = archive.db.read("SELECT id, platform, started_at FROM sessions ORDER BY num")
        rows = archive.db.read("SELECT m.id, s.id, m.role, m.content, m.tool_name, m.tool_calls, "
                               "m.timestamp FROM messages AS m JOIN sessions AS s "
                               "ON s.num = m.session ORDER BY m.id")
        con = sqlite3.connect(path)
        with con:  # its triggers fill both of its FTS5 tables
            con.executemany("INSERT INTO sessions(id, source, started_at) VALUES (?, ?, ?)",
                            sessions)
            con.executemany("INSERT INTO messages(id, session_id, role, content, tool_name, "
                            "tool_calls, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        con.close()
    return SessionDB(db_path=path)


HERMES_SQL = (
    "SELECT m.id, m.session_id, m.role, snippet(messages_fts, 0, '>>>', '<<<', '...', 40), "
    "m.timestamp, m.tool_name FROM messages_fts JOIN messages AS m ON m.id = messages_fts.rowid "
    "WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?")


def questions(corpus: Corpus, archive: SessionArchive, old: int, count: int
              ) -> list[tuple[str, int]]:
    """(query, target id): four mid-frequency words of an older message and one it lacks."""
    rank = {w: i for i, w in enumerate(corpus.vocab)}
    mid = [w for w in corpus.vocab[40:2000] if w.isalpha()]
    rows = archive.db.read("SELECT id, content FROM messages WHERE id <= ? AND role IN "
                           "('user', 'assistant') AND length(content) > 300 ORDER BY id", (old,))
    rng = random.Random(7)
    out: list[tuple[str, int]] = []
    for mid_id, content in rng.sample(rows, len(rows)):
        words = sorted({w for w in _WORD.findall(content.lower()) if 40 <= rank.get(w, 0) < 2000})
        if len(words) < 4:
            continue
        chosen = rng.sample(words, 4)
        absent = next(w for w in iter(lambda: rng.choice(mid), None) if w not in words)
        q = " ".join([*chosen, absent])
        if current.search_messages(archive, q, limit=1, context=False).matched != "any":
            continue  # some message holds all four: not a fallback question
        out.append((q, int(mid_id)))
        if len(out) >= count:
            break
    return out


def reference(archive: SessionArchive, query: str, k: int) -> list[int]:
    """Every match of the try that matches first, scored and sorted here, ties newest first."""
    plan = current.plan_query(archive, query)
    for expr in (plan.strict, plan.loose, plan.fallback):
        if not expr:
            continue
        if archive.backend == "postgresql":
            from hermes_core.plugins.memory.session_archive.search import tsquery_text

            rows = archive.db.read(
                "SELECT id, -ts_rank_cd(tsv, to_tsquery('english', :q)) FROM messages "
                "WHERE tsv @@ to_tsquery('english', :q)", {"q": tsquery_text(expr)})
        else:
            rows = archive.db.read("SELECT rowid, bm25(messages_fts, 1.0, 0.5, 0.6) FROM "
                                   "messages_fts WHERE messages_fts MATCH ?", (expr,))
        if rows:
            return [int(r[0]) for r in sorted(rows, key=lambda r: (float(r[1]), -int(r[0])))[:k]]
    return []


def top(module: ModuleType, archive: SessionArchive, q: str, k: int) -> list[int]:
    return [h.message_id for h in module.search_messages(archive, q, limit=k, context=False).hits]


def agreement(archive: SessionArchive, queries: list[str], searches: dict[str, ModuleType]
              ) -> None:
    refs = {q: reference(archive, q, 10) for q in queries}
    ranked = [q for q in queries if refs[q]]
    if len(ranked) < len(queries):  # PostgreSQL: stopwords only are substrings, newest first
        print(f"  {len(queries) - len(ranked)} queries have no ranked match (stopwords only): "
              "left out of the agreement")
    for name, module in searches.items():
        overlaps, differ, first = [], 0, 0
        for q in ranked:
            got, ref = top(module, archive, q, 10), refs[q]
            overlaps.append(len(set(got) & set(ref)) / min(10, len(ref)))
            differ += got != ref
            first += bool(got) and got[0] == ref[0]
        print(f"  {name}: top-10 overlap with every-match ranking {statistics.mean(overlaps):.3f} "
              f"(queries whose top 10 differ: {differ} of {len(ranked)}; same top result "
              f"{first} of {len(ranked)})")


def recall(archive: SessionArchive, qs: list[tuple[str, int]], searches: dict[str, ModuleType],
           hermes: sqlite3.Connection | None) -> None:
    ref = sum(t in reference(archive, q, 3) for q, t in qs) / len(qs)
    print(f"  older-message OR recall@3 ({len(qs)} questions): every-match reference {ref:.3f}",
          end="")
    for name, module in searches.items():
        print(f", {name} {sum(t in top(module, archive, q, 3) for q, t in qs) / len(qs):.3f}",
              end="")
    if hermes is not None:
        got = sum(t in [r[0] for r in hermes.execute(HERMES_SQL, (" OR ".join(q.split()), 3))]
                  for q, t in qs)
        print(f", Hermes-style FTS5 OR {got / len(qs):.3f}", end="")
    print()


def statements(archive: SessionArchive, module: ModuleType, queries: list[str]) -> float:
    counted = [0]
    names = [n for n in ("read", "read_many", "read_with") if hasattr(archive.db, n)]

    def counting(real: Callable[..., Any], many: bool) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counted[0] += len(args[0]) if many else 1
            return real(*args, **kwargs)
        return call

    for n in names:
        setattr(archive.db, n, counting(getattr(archive.db, n), n == "read_many"))
    try:
        for q in queries:
            module.search_messages(archive, q)
    finally:
        for n in names:
            delattr(archive.db, n)
    return counted[0] / len(queries)


def latency(archive: SessionArchive, queries: list[str], searches: dict[str, ModuleType],
            hermes: sqlite3.Connection | None, rounds: int, agent_db: Any = None) -> None:
    runs: dict[str, Callable[[str], object]] = {
        name: (lambda q, m=module: m.search_messages(archive, q))
        for name, module in searches.items()}
    if agent_db is not None:
        runs[AGENT] = lambda q: agent_db.search_messages(q)
    if hermes is not None:
        runs["Hermes-style statement"] = lambda q: hermes.execute(HERMES_SQL, (q, 20)).fetchall()
    for q in queries[:5]:
        for fn in runs.values():
            fn(q)
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    for r in range(rounds):  # A B A B: the order alternates each round
        for q in queries:
            for name in order if r % 2 == 0 else order[::-1]:
                times[name].append(timed(lambda n=name, q=q: runs[n](q)))
    base = statistics.median(times[order[-1]]) if hermes is not None else None
    real = statistics.median(times[AGENT]) if AGENT in times else None
    for name in order:
        p50, p95 = statistics.median(times[name]), pct(times[name], 0.95)
        ratio = f"  ratio to Hermes-style p50 {p50 / base:.2f}" if base else ""
        ratio += f", to Hermes' search_messages {p50 / real:.2f}" if real else ""
        print(f"  {name}: p50 {p50:.2f} ms  p95 {p95:.2f} ms{ratio}")
    for name, module in searches.items():
        print(f"  {name}: {statements(archive, module, queries):.1f} SQL statements per search")


def measure(archive: SessionArchive, corpus: Corpus, args: argparse.Namespace,
            searches: dict[str, ModuleType], hermes: sqlite3.Connection | None,
            agent_db: Any = None) -> None:
    sample = [m for _s, msgs in itertools.islice(corpus.sessions(), 400) for m in msgs][:10_000]
    queries = corpus.queries(sample).plain
    agreement(archive, queries, searches)
    recall(archive, questions(corpus, archive, args.old, args.questions), searches, hermes)
    latency(archive, queries, searches, hermes, args.rounds, agent_db)


def search_at(revision: str, root: Path) -> ModuleType:
    """search.py as it was at ``revision``, loaded beside the current one; at a revision before
    its PostgreSQL half was folded into it, with the pg_search.py of that revision too."""
    split = subprocess.run(
        ["git", "cat-file", "-e", f"{revision}:plugins/memory/session_archive/pg_search.py"],
        capture_output=True).returncode == 0
    if not split:
        return module_at(revision, "search", root)
    module_at(revision, "pg_search", root)  # the search's PostgreSQL half, as it was
    return module_at(revision, "search", root,
                     {"from .pg_search import": "from .pg_search_before import"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="newer messages")
    parser.add_argument("--old", type=int, default=4_700, help="older messages, under them")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--before", default=None, help="git revision to compare with")
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument("--dir", type=Path, default=None, help="where the archives are kept")
    parser.add_argument("--reuse", action="store_true", help="reuse archives built earlier")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="lexical-"))
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus()
    searches: dict[str, ModuleType] = {"new search": current}
    if args.before:
        searches[f"search at {args.before}"] = search_at(args.before, root)
    if args.backend in ("sqlite", "both"):
        path = root / f"lexical-{args.old}-{args.size}.db"
        if not (args.reuse and path.exists()):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            for name in ("hermes.db", "hermes-agent.db", "hermes-agent.db-wal",
                         "hermes-agent.db-shm"):
                (root / name).unlink(missing_ok=True)
            with SessionArchive(path, synchronous="normal") as archive:
                fill(archive, corpus, args.old, args.size)
        print(f"== SQLite: {args.old:,} older messages under {args.size:,} newer ones")
        with SessionArchive(path) as archive:
            hermes = hermes_copy(archive, root / "hermes.db")
            agent_db = hermes_agent_db(archive, root / "hermes-agent.db")
            if agent_db is None:
                print("  (hermes-agent is not installed: Hermes' own search_messages not timed)")
            measure(archive, corpus, args, searches, hermes, agent_db)
    if args.backend in ("postgresql", "both"):
        from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
        from hermes_core.storage import close_pools, parse_storage_url
        from hermes_core.testing.postgres import temp_postgres

        print(f"== PostgreSQL: {args.old:,} older messages under {args.size:,} newer ones")
        with temp_postgres({"shared_buffers": "512MB"}) as pg:
            parsed = parse_storage_url(pg.create_database("lexical"))
            with PgSessionArchive(parsed) as archive:
                fill(archive, corpus, args.old, args.size)
                archive.db.write_one("VACUUM (ANALYZE) messages, sessions")
                measure(archive, corpus, args, searches, None)
            close_pools()


if __name__ == "__main__":
    main()
