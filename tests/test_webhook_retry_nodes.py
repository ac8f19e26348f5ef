"""kill -9 of a node mid-load, clients retrying on the other (issue 33 item 3): the smaller
version of bench/bench_webhook_kill.py, on the same code. Two real ``serve`` processes on one
PostgreSQL database; the model is the loopback Messages API (the only fake: its words)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_webhook_kill.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_webhook_kill", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kill_9_mid_load_loses_nothing_and_stores_nothing_twice(tmp_path: Path,
                                                               pg_url: str) -> None:
    counts = _bench().run(pg_url, tmp_path, clients=6, messages=5, latency=0.3)
    assert counts["sent"] == 30
    assert counts["lost"] == 0, counts
    assert counts["duplicated"] == 0, counts
    assert counts["conversations_out_of_order"] == 0, counts
    assert counts["user_messages_in_a_row"] == 0, counts
    assert counts["stored_user_messages"] == 30, counts
