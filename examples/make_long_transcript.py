"""Writes examples/long-incident.jsonl: a long, realistic incident investigation for ``replay``.

The conversation is long enough (about 135,000 tokens by the kernel's estimate) to cross the
compressor's default threshold for the default model (50 % of a 200,000-token window), so a
replay shows a real compaction. The user pastes logs, query plans and code the way people do in a
long debugging session; the assistant's answers are computed from what was pasted (counts,
percentiles, slow queries), so they are consistent with it. Everything is generated from a fixed
seed: running this script again writes the same file.

    python examples/make_long_transcript.py [OUT.jsonl]
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from datetime import datetime, timedelta
from pathlib import Path

SEED = 20250304
DEPOTS = ["RTM-01", "RTM-04", "AMS-02", "UTR-03", "EIN-01", "ANR-05"]
ROUTES = ["/v2/route", "/v2/route/batch", "/v2/eta", "/v2/depots", "/healthz"]
TABLES = ["shipment_events", "route_plans", "depot_capacity", "driver_shifts", "parcel_scans"]
MODULES = ["planner", "eta", "capacity", "scans", "shifts", "geo"]


def log_excerpt(rng: random.Random, start: datetime, n: int, incident: bool) -> tuple[str, dict]:
    lines, durations, errors, pool_waits = [], [], 0, 0
    t = start
    for _ in range(n):
        t += timedelta(milliseconds=rng.randint(40, 900))
        route = rng.choice(ROUTES)
        depot = rng.choice(DEPOTS)
        db_ms = int(rng.lognormvariate(3.2, 0.6))
        slow = incident and rng.random() < 0.18
        if slow:
            db_ms += rng.randint(1500, 4800)
        dur = db_ms + int(rng.lognormvariate(3.6, 0.4))
        status = 200
        if slow and rng.random() < 0.45:
            status, errors = 502, errors + 1
        cache = "miss" if slow or rng.random() < 0.2 else "hit"
        req = f"{rng.getrandbits(40):010x}"
        durations.append(dur)
        lines.append(
            f"{t.isoformat(timespec='milliseconds')}Z {'WARN ' if status != 200 else 'INFO '} "
            f"parcel-router[pid={rng.choice([4127, 4131, 4133])}] req={req} route={route} "
            f"depot={depot} status={status} dur_ms={dur} db_ms={db_ms} cache={cache}"
        )
        if slow and rng.random() < 0.5:
            pool_waits += 1
            lines.append(
                f"{t.isoformat(timespec='milliseconds')}Z WARN  parcel-router sqlalchemy.pool "
                f"QueuePool limit of size 10 overflow 5 reached, connection timed out after "
                f"{rng.choice([3, 5])}.00 s (req={req})"
            )
    q = statistics.quantiles(durations, n=20)
    facts = {"n": len(durations), "p50": int(statistics.median(durations)), "p95": int(q[18]),
             "max": max(durations), "errors": errors, "pool_waits": pool_waits,
             "first": start.strftime("%H:%M"), "last": t.strftime("%H:%M")}
    return "\n".join(lines), facts


def explain_plan(rng: random.Random, table: str, seq: bool) -> tuple[str, dict]:
    rows = rng.randint(2_000_000, 45_000_000)
    ms = rng.uniform(900, 7_500) if seq else rng.uniform(2, 40)
    scan = (f"Parallel Seq Scan on {table}  (cost=0.00..{rows // 9:.2f} rows={rows // 3} width=64) "
            f"(actual time=0.41..{ms * 0.9:.2f} rows={rows // 3} loops=3)\n"
            f"                    Filter: ((depot_id = 'RTM-04'::text) AND (event_time > (now() - "
            f"'7 days'::interval)))\n                    Rows Removed by Filter: {rows // 3 - 4100}"
            if seq else
            f"Index Scan using {table}_depot_time_idx on {table}  (cost=0.56..812.40 rows=4100 "
            f"width=64) (actual time=0.05..{ms * 0.8:.2f} rows=4093 loops=1)\n"
            f"                    Index Cond: ((depot_id = 'RTM-04'::text) AND (event_time > "
            f"(now() - '7 days'::interval)))")
    plan = (
        f"EXPLAIN (ANALYZE, BUFFERS) SELECT depot_id, date_trunc('hour', event_time) AS hour, "
        f"count(*) FROM {table} WHERE depot_id = 'RTM-04' AND event_time > now() - interval "
        f"'7 days' GROUP BY 1, 2;\n\n"
        f"HashAggregate  (cost=1.00..2.00 rows=168 width=24) (actual time={ms:.2f}..{ms + 1.3:.2f} "
        f"rows=168 loops=1)\n  Group Key: depot_id, date_trunc('hour'::text, event_time)\n"
        f"  ->  Gather  (actual time=0.90..{ms * 0.95:.2f} rows=4093 loops=1)\n"
        f"        Workers Planned: 2\n        Workers Launched: 2\n              ->  {scan}\n"
        f"Buffers: shared hit={rng.randint(100, 9000)} read={rng.randint(0, 400_000) if seq else 12}\n"
        f"Planning Time: {rng.uniform(0.1, 0.9):.3f} ms\nExecution Time: {ms:.3f} ms"
    )
    return plan, {"ms": ms, "rows": rows, "seq": seq}


def source_file(rng: random.Random, module: str) -> str:
    funcs = []
    for i in range(rng.randint(5, 8)):
        name = rng.choice(["load", "plan", "score", "merge", "fetch", "refresh", "assign"])
        funcs.append(
            f"def {name}_{module}_{i}(session: Session, depot_id: str, *, limit: int = 500) -> list[dict]:\n"
            f"    \"\"\"{name.title()} {module} rows for one depot "
            f"(called from the {rng.choice(ROUTES)} handler).\"\"\"\n"
            f"    started = time.perf_counter()\n"
            f"    rows = session.execute(\n"
            f"        text(\"SELECT * FROM {rng.choice(TABLES)} WHERE depot_id = :d \"\n"
            f"             \"ORDER BY event_time DESC LIMIT :n\"),\n"
            f"        {{\"d\": depot_id, \"n\": limit}},\n"
            f"    ).mappings().all()\n"
            f"    if len(rows) == limit:\n"
            f"        log.warning(\"{module}: limit %d reached for %s\", limit, depot_id)\n"
            f"    cache.set(f\"{module}:{{depot_id}}\", rows, ttl={rng.choice([30, 60, 300])})\n"
            f"    metrics.histogram(\"{module}.{name}.seconds\", time.perf_counter() - started)\n"
            f"    return [dict(r) for r in rows]\n"
        )
    header = (
        f"# parcel_router/{module}.py\nfrom __future__ import annotations\n\nimport logging\nimport time\n\n"
        f"from sqlalchemy import text\nfrom sqlalchemy.orm import Session\n\n"
        f"from .cache import cache\nfrom .metrics import metrics\n\nlog = logging.getLogger(__name__)\n\n"
        f"POOL_SIZE = 10\nMAX_OVERFLOW = 5\n\n\n"
    )
    return header + "\n\n".join(funcs)


def turns(rng: random.Random) -> list[dict]:
    out: list[dict] = [{"meta": {
        "title": "parcel-router incident: 502s and slow routing after the depot rollout",
        "description": "A long debugging session: logs, query plans and code pasted into the chat. "
                       "Long enough to trigger one compaction with the default model and settings.",
        "generator": "examples/make_long_transcript.py", "seed": SEED}}]

    def user(text: str) -> None:
        out.append({"role": "user", "content": text})

    def assistant(text: str, calls: list[dict] | None = None) -> None:
        line: dict = {"role": "assistant", "content": text}
        if calls:
            line["tool_calls"] = calls
        out.append(line)

    user("We have an incident on parcel-router (our routing API, Python 3.11, FastAPI, SQLAlchemy "
         "2.0, Postgres 15 on RDS, Redis for caching). Since the depot rollout on Monday we get "
         "bursts of 502s from the load balancer and p95 latency jumped from ~180 ms to several "
         "seconds. I'll paste logs as we go. I'm Jonas, on call this week.")
    assistant("Understood, Jonas. Let's find when the bursts start and what they correlate with: "
              "database time, cache misses, or one route. Paste a log window that includes a burst.",
              [{"id": "toolu_mem_1", "name": "memory", "arguments": {
                  "action": "add", "target": "user",
                  "content": "Jonas: on call for parcel-router (FastAPI, SQLAlchemy 2.0, "
                             "Postgres 15 on RDS, Redis)."}}])
    assistant("Noted who you are and the stack. Paste the first window when ready.")

    clock = datetime(2025, 3, 4, 2, 30)
    saved_pool = saved_index = False
    for i in range(85):
        kind = i % 5
        clock += timedelta(minutes=rng.randint(3, 11))
        if kind in (0, 3):
            incident = rng.random() < 0.6
            text, f = log_excerpt(rng, clock, rng.randint(70, 95), incident)
            user(f"Window {f['first']}-{f['last']} UTC from pod parcel-router-{rng.randint(1, 6)}:\n\n{text}")
            verdict = (
                f"This window has {f['errors']} 502s and {f['pool_waits']} QueuePool timeouts out of "
                f"{f['n']} requests. p50 is {f['p50']} ms, p95 {f['p95']} ms, worst {f['max']} ms. "
                "Every slow request has a large db_ms and a cache miss: requests are waiting for a "
                "database connection, not for CPU. The pool is 10 + 5 overflow per pod, and the slow "
                "queries hold connections for seconds, so the pool drains and the load balancer's "
                "5 s timeout turns the wait into a 502."
                if f["errors"] or f["pool_waits"] else
                f"A quiet window: {f['n']} requests, no 502s, p50 {f['p50']} ms, p95 {f['p95']} ms. "
                "db_ms stays low and the cache hit rate is normal, so the pool never runs dry here. "
                "The bursts need the slow queries to line up; keep this one as the baseline."
            )
            calls = None
            if f["pool_waits"] and not saved_pool:
                saved_pool = True
                calls = [{"id": f"toolu_mem_pool_{i}", "name": "memory", "arguments": {
                    "action": "add", "target": "memory",
                    "content": "parcel-router: SQLAlchemy QueuePool 10+5 per pod; 502s come from pool "
                               "timeouts behind slow depot queries (LB timeout 5 s)."}}]
            if calls:
                assistant("Saving the pool finding, it will matter again.", calls)
            assistant(verdict)
        elif kind == 1:
            table = rng.choice(TABLES)
            seq = rng.random() < 0.7
            plan, f = explain_plan(rng, table, seq)
            user(f"Here is the plan of the depot dashboard query on {table}:\n\n{plan}")
            if seq:
                answer = (f"It reads the whole table: a parallel sequential scan over about "
                          f"{f['rows']:,} rows to keep ~4,100, {f['ms']:.0f} ms in all. Add "
                          f"`CREATE INDEX CONCURRENTLY {table}_depot_time_idx ON {table} "
                          "(depot_id, event_time DESC);` and the same query becomes an index scan "
                          "in a few milliseconds. Until then every dashboard refresh holds a pool "
                          "connection for the whole scan.")
                calls = None
                if not saved_index:
                    saved_index = True
                    calls = [{"id": f"toolu_mem_idx_{i}", "name": "memory", "arguments": {
                        "action": "add", "target": "memory",
                        "content": "Depot queries need (depot_id, event_time DESC) indexes; create them "
                                   "CONCURRENTLY on RDS during the day, not during the 02:00 ETL."}}]
                if calls:
                    assistant("This is the pattern; noting the fix.", calls)
                assistant(answer)
            else:
                assistant(f"This one is fine: an index scan on {table}_depot_time_idx, "
                          f"{f['ms']:.1f} ms for ~4,100 rows. This table is not part of the problem.")
        elif kind == 2:
            module = rng.choice(MODULES)
            user(f"This is the {module} module the slow route calls. Anything wrong?\n\n"
                 f"```python\n{source_file(rng, module)}\n```")
            assistant(f"Three things in {module}.py. First, each function opens its query on the "
                      "request's session and keeps the connection until the response is "
                      "serialised; fetch, then close the session before the slow scoring work. "
                      "Second, `ORDER BY event_time DESC LIMIT :n` without the composite index "
                      "forces a sort over every row of the depot. Third, the cache TTLs differ per "
                      "function, so a dashboard refresh misses several keys at once and stampedes "
                      "the database; put a single-flight lock around the refill.")
        else:
            user(rng.choice([
                "Ops asks whether raising the pool to 30 per pod would fix it. Thoughts?",
                "Could this be the RDS instance size? CPU on the DB peaks at 85% during bursts.",
                "The new depots went live Monday; they have 3x the scan volume of the old ones.",
                "We also see 'canceling statement due to statement timeout' in the DB logs.",
                "Would pgbouncer in transaction mode help here?",
            ]))
            assistant(rng.choice([
                "Raising the pool only moves the queue into Postgres: 6 pods x 30 connections all "
                "running sequential scans would saturate the instance. Fix the scans first; then "
                "size the pool from the measured concurrency.",
                "85% CPU during bursts is the sequential scans, not the instance size. A bigger "
                "instance buys time but the scans grow with the new depots' volume.",
                "That explains the timing: the depot tables tripled, so scans that used to fit in "
                "cache now read from disk, and the dashboard query went from tolerable to seconds.",
                "Those cancellations are the 8 s statement_timeout killing the worst scans. They "
                "free the connection but the request has already waited long enough to 502.",
                "pgbouncer in transaction mode helps with connection churn, but here each query "
                "holds its connection for seconds doing real work; it would not shorten that.",
            ]))
    user("Summary for the postmortem: what did we find and what do we ship today?")
    assistant("Root cause: the depot rollout tripled the rows in the depot tables, and the dashboard "
              "and routing queries had no (depot_id, event_time) index, so they became sequential "
              "scans holding pool connections for seconds; the 10+5 pool per pod drained and the "
              "load balancer turned the waits into 502s. Ship today: the composite indexes (created "
              "concurrently), closing sessions before the scoring work, and a single-flight cache "
              "refill. Tomorrow: size the pool from measured concurrency, alert on QueuePool "
              "timeouts.")
    return out


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("long-incident.jsonl")
    rng = random.Random(SEED)
    with target.open("w", encoding="utf-8") as fh:
        for obj in turns(rng):
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
