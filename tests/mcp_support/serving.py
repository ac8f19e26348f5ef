"""Running ``hermes-core mcp serve`` in a subprocess for the tests (stdio or HTTP on 127.0.0.1)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: bound on every wait for a subprocess (the machine may be busy: generous, never a sleep)
WAIT = 120.0


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERMES_CORE_", "ANTHROPIC_"))}
    env["HERMES_CORE_HOME"] = str(home)
    env.update(extra)
    return env


def cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_core", *args], env=cli_env(home, **extra),
                          capture_output=True, text=True, timeout=WAIT)


@contextmanager
def http_server(home: Path, *args: str, **extra: str) -> Iterator[str]:
    """Start ``mcp serve --transport http --port 0``; yield its URL once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_core", "mcp", "serve", "--transport", "http", "--port", "0",
         *args], env=cli_env(home, **extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    try:
        while True:
            line = lines.get(timeout=WAIT)
            if line is None:
                raise AssertionError("mcp serve exited before listening:\n" + "".join(seen))
            seen.append(line)
            if "serving on " in line:
                yield line.split("serving on ", 1)[1].strip()
                break
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
