"""Abandoned sessions and slow connections against ``hermes-core mcp serve --transport http``.

    python bench/bench_mcp_sessions.py [--sessions 1000] [--idle-seconds 20] [--slow 300] [--fd-limit 256]

What runs (all real, on 127.0.0.1): the command as a subprocess over a fresh home (file memory and
session archive), bearer token from the environment.

1. **abandoned sessions**: ``--sessions`` stateful clients each do the handshake and one
   ``recall`` call (which opens an archived session), then vanish without closing. The server's
   resident memory (``/proc/<pid>/status``) is printed at the start (after one warm-up session),
   with all of them open, and once every archived session has ended (``mcp.session_idle_minutes``
   set to ``--idle-seconds``). Target: memory back within 10 % of the start (ratio = 1.10 x start
   / after; >= 1.0 means met), and every archived session ended (ratio = ended / opened).
   ``--rounds`` (default 2) repeats it: a later round ending where the first did shows that
   nothing is kept per session (what the first round adds is caches filling up to their bounds:
   RssAnon and RssFile are printed to tell the heap from file pages).
2. **slow connections**: the server's open-file limit lowered to ``--fd-limit``; ``--slow`` sockets
   each send half a request header and stall; meanwhile real SDK clients call ``tools/list``.
   Target: every legitimate call answered (ratio = answered / tried).

Nothing asserts; read the figures. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from mcp_support.serving import TOKEN, connect, http_server  # noqa: E402

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json",
          "authorization": f"Bearer {TOKEN}"}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def server_pid(port: int) -> int:
    """The pid of the process listening on ``port`` (the server, a child of this one)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":
                inode = cols[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    raise RuntimeError(f"no process listens on {port}")


def open_session(client: httpx.Client, url: str, n: int) -> bool:
    init = client.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": f"abandoned-{n}", "version": "1"}}})
    if init.status_code != 200:
        return False
    headers = {**ACCEPT, "mcp-session-id": init.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    called = client.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": f"abandoned session {n}"}}})
    return called.status_code == 200


def archive_counts(home: Path) -> tuple[int, int]:
    """(MCP sessions archived, of which ended), read from the archive's SQLite file."""
    with sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True) as db:
        total, ended = db.execute("SELECT count(*), count(ended_at) FROM sessions "
                                  "WHERE platform = 'mcp'").fetchone()
    return int(total), int(ended)


def make_home(root: Path, idle_seconds: float, sessions: int, embedder: str | None = None) -> Path:
    home = root / "home"
    (home / "memories").mkdir(parents=True)
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        f"mcp:\n  session_idle_minutes: {idle_seconds / 60:.4f}\n  max_sessions: {sessions + 100}\n"
        "  header_timeout_seconds: 5\n"
        + (f"embeddings:\n  embedder: {embedder}\n  timeout: 120\n" if embedder else ""),
        encoding="utf-8")
    return home


def rss_parts(pid: int) -> str:
    """Anonymous and file-backed resident memory (what grows: the heap, or pages of files), and
    the anonymous part by kind (:func:`anon_kinds`)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if line.startswith(("RssAnon", "RssFile")))
    return ", ".join([*(f"{k} {int(v.split()[0]) / 1024:.1f} MB" for k, v in fields.items()),
                      *(f"{k} {v / 1024:.1f} MB" for k, v in anon_kinds(pid).items())])


def anon_kinds(pid: int) -> dict[str, int]:
    """Resident KiB of the anonymous mappings by kind: the main ``heap`` (brk), glibc's
    ``thread arenas`` (one per thread that allocated, up to 8 per core: a read-write part followed
    by its reserved rest, 64 MiB in all), and ``other`` (Python's 1 MiB object arenas, adjacent
    ones merged by the kernel, mmap'd large blocks, thread stacks)."""
    maps: list[list[Any]] = []  # [start, end, permissions, name, resident KiB]
    head: list[Any] | None = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and "-" in parts[0] and ":" in parts[3]:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            head = [lo, hi, parts[1], parts[5] if len(parts) > 5 else "", 0]
            maps.append(head)
        elif parts and parts[0] == "Rss:" and head is not None:
            head[4] = int(parts[1])
    out = {"heap": 0, "thread arenas": 0, "other": 0}
    for i, (lo, hi, perm, name, rss) in enumerate(maps):
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        if name == "[heap]":
            out["heap"] += rss
        elif name or not perm.startswith("rw"):
            continue
        elif nxt and nxt[2].startswith("---") and nxt[0] == hi and nxt[1] - lo == 64 << 20:
            out["thread arenas"] += rss
        else:
            out["other"] += rss
    return out


def abandoned(root: Path, count: int, idle_seconds: float, rounds: int,
              embedder: str | None = None) -> None:
    home = make_home(root / "abandoned", idle_seconds, count * rounds, embedder)
    with http_server(home) as url, httpx.Client(timeout=120) as client:
        pid = server_pid(int(url.rsplit(":", 1)[1].split("/")[0]))
        open_session(client, url, -1)  # warm-up: the first call loads what every call needs
        start = rss_mb(pid)
        print(f"abandoned sessions: RSS start {start:.1f} MB ({rss_parts(pid)})")
        settled_of: list[float] = []
        for round_no in range(1, rounds + 1):
            began = time.perf_counter()
            ok = sum(open_session(client, url, n) for n in range(count))
            opened_s = time.perf_counter() - began
            peak = rss_mb(pid)
            print(f"  round {round_no}: {ok}/{count} opened in {opened_s:.1f} s; all open "
                  f"{peak:.1f} MB")
            deadline = time.monotonic() + idle_seconds * 4 + 120
            total, ended = archive_counts(home)
            while ended < total and time.monotonic() < deadline:
                time.sleep(0.5)
                total, ended = archive_counts(home)
            waited = time.perf_counter() - began - opened_s
            after = rss_mb(pid)
            print(f"    after expiry ({waited:.1f} s later): RSS {after:.1f} MB "
                  f"({after / start:.3f} x start); archived sessions ended {ended}/{total}")
            time.sleep(idle_seconds)  # one more idle period: the server's next sweeps have run
            settled = rss_mb(pid)
            print(f"    one idle period later: RSS {settled:.1f} MB ({settled / start:.3f} x start;"
                  f" {rss_parts(pid)})")
            settled_of.append(min(after, settled))
        first = settled_of[0]
        print(f"  target: RSS within 10 % of start -> ratio {1.10 * start / first:.2f}; "
              f"sessions ended -> ratio {ended / max(total, 1):.2f}")
        if rounds > 1:
            print(f"  each later round of {count} against the first (1.00: nothing kept per "
                  "session): " + ", ".join(f"{v / first:.3f}" for v in settled_of[1:]))


def slow_connections(root: Path, count: int, fd_limit: int) -> None:
    home = make_home(root / "slow", 1800, 100)
    with http_server(home, fd_limit=fd_limit) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        socks = []
        for _ in range(count):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                socks.append(s)
            except OSError:
                break

        async def one() -> bool:
            try:
                with anyio.fail_after(30):
                    async with connect(url) as client:
                        return bool((await client.list_tools()).tools)
            except Exception:
                return False

        tried = 20
        answered = sum(anyio.run(one) for _ in range(tried))
        for s in socks:
            s.close()
        print(f"slow connections: {len(socks)} opened against a {fd_limit}-descriptor limit; "
              f"legitimate tools/list answered {answered}/{tried} -> ratio {answered / tried:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of abandoned sessions (a later one shows what each keeps)")
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--fd-limit", type=int, default=256)
    parser.add_argument("--embedder", default=None,
                        help="embeddings.embedder for the abandoned sessions' home (none: words "
                        "only; default: the config's auto, the local embedder when installed)")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    with tempfile.TemporaryDirectory(prefix="bench-mcp-sessions-") as tmp:
        abandoned(Path(tmp), args.sessions, args.idle_seconds, args.rounds, args.embedder)
        slow_connections(Path(tmp), args.slow, args.fd_limit)


if __name__ == "__main__":
    main()
