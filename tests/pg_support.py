"""Helpers for tests against the real PostgreSQL server of the conftest."""

from __future__ import annotations

import threading

import psycopg


def drop_connections(pg_url: str, *, bound: float = 10.0) -> int:
    """The server ends every other connection to the database (as a restart or a failover
    would) and this returns once those backends have exited (``pg_terminate_backend`` only
    signals them): the pool's connections are then dead for sure. Returns how many."""
    with psycopg.connect(pg_url, autocommit=True) as con:
        pids = [r[0] for r in con.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()").fetchall()]
        for pid in pids:
            con.execute("SELECT pg_terminate_backend(%s)", (pid,))
        pause = threading.Event()
        for _ in range(int(bound / 0.02)):
            row = con.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                              (pids,)).fetchone()
            if row is not None and row[0] == 0:
                return len(pids)
            pause.wait(0.02)  # polling the server's own view of its backends
    raise AssertionError(f"backends {pids} still running {bound:.0f} s after termination")


def settle_pool(pool: object, *, bound: float = 10.0) -> None:
    """Wait until ``pool`` has no connection being opened or handed out (its own counters), so
    a following :func:`drop_connections` ends every connection it will hand out: a connection
    the pool was still opening in the background would otherwise outlive the drop."""
    pause = threading.Event()
    for _ in range(int(bound / 0.02)):
        stats = pool.get_stats()  # type: ignore[attr-defined]
        if stats["pool_size"] == stats["pool_available"] >= stats["pool_min"]:
            return
        pause.wait(0.02)  # polling the pool's own counters
    raise AssertionError(f"the pool did not settle within {bound:.0f} s: {pool.get_stats()}")  # type: ignore[attr-defined]
