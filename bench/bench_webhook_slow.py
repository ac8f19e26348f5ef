"""Slow clients against the webhook: are unsigned, trickling connections closed, and does
``/health`` keep answering while they are open?

    python bench/bench_webhook_slow.py [--connections 400] [--fd-limit 256] [--wait 30]

What runs: the webhook platform in this process (uvicorn + starlette on 127.0.0.1, the built-in
session archive, no model call: nothing here gets past the signature) with its default settings,
and ``--connections`` raw sockets that each send a request line and half a header, then stall, as a
slowloris client does. The process's open-file limit is lowered to ``--fd-limit`` first (soft
limit), the situation in which these connections used to starve the server. Then it prints how
many ``/health`` probes were answered while the slow sockets were open, and how many of the slow
sockets the server had closed after ``--wait`` seconds.

Targets: every ``/health`` probe answered (ratio = answered / probes), and every slow socket
closed within ``webhook.header_timeout_seconds`` (10 s by default) plus slack (ratio = closed /
opened). Nothing asserts; read the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SECRET = "bench-secret-0123456789abcdef0123"


def slow_client(port: int, connections: int, wait: float) -> None:
    """The child process: open the slow sockets, report, then count what the server closes."""
    socks = []
    for _ in range(connections):
        with contextlib.suppress(OSError):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /messages HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
    print(len(socks), flush=True)
    deadline = time.monotonic() + wait
    open_ = list(socks)
    while open_ and time.monotonic() < deadline:
        ready, _, _ = select.select(open_, [], [], 0.5)
        for s in ready:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data == b"":
                open_.remove(s)
    print(len(socks) - len(open_), flush=True)


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        slow_client(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=400)
    parser.add_argument("--fd-limit", type=int, default=256)
    parser.add_argument("--wait", type=float, default=30.0)
    parser.add_argument("--probes", type=int, default=10)
    args = parser.parse_args()

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = args.fd_limit if hard == resource.RLIM_INFINITY else min(args.fd_limit, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    import httpx

    from hermes_core.dispatch import connect_platform, disconnect_platform
    from hermes_core.testing import make_host

    home = Path(tempfile.mkdtemp(prefix="bench-slow-"))
    host = make_host(home, config=f"memory:\n  providers: [session_archive]\nwebhook:\n"
                                  f"  secret: {SECRET}\n  port: 0\n")
    platform, dispatcher = connect_platform(host, "webhook")
    port = int(platform.url.rsplit(":", 1)[1])
    # the client's sockets live in a child process with a normal limit: only the server is squeezed
    child = subprocess.Popen([sys.executable, __file__, "--client", str(port),
                              str(args.connections), str(args.wait)],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: resource.setrlimit(
                                 resource.RLIMIT_NOFILE, (min(65536, hard) if hard !=
                                                          resource.RLIM_INFINITY else 65536, hard)))
    assert child.stdout is not None
    opened = int(child.stdout.readline())
    answered = 0
    with httpx.Client(timeout=5) as client:
        for _ in range(args.probes):
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{platform.url}/health").status_code == 200:
                    answered += 1
    closed = int(child.stdout.readline())
    child.wait()
    disconnect_platform(host, platform, dispatcher)
    host.shutdown()
    print(f"fd limit {limit}, slow connections opened {opened}")
    print(f"/health answered while they were open: {answered}/{args.probes} "
          f"(ratio {answered / args.probes:.2f})")
    print(f"slow connections closed by the server within {args.wait:.0f} s: {closed}/{opened} "
          f"(ratio {closed / max(opened, 1):.2f})")


if __name__ == "__main__":
    main()
