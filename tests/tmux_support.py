"""A real terminal for tests: a command runs in a tmux pane (a pty, readline, a terminal width),
keys are typed into it and the pane is read back, always waiting on what the screen shows, with a
deadline. The tmux server uses a private socket (the conftest's ``tmux_socket`` fixture kills it
at the end).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

TMUX = shutil.which("tmux") or "tmux"
#: how long a wait for the screen may take: a bound, not an expectation (a CLI starting on a
#: loaded 2-core machine took past 20 s); each wait returns as soon as the text shows
WAIT = 180.0

__all__ = ["TMUX", "Pane", "start_pane"]


class Pane:
    def __init__(self, socket: str, name: str) -> None:
        self.socket, self.name = socket, name

    def tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=60).stdout

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        self.tmux("send-keys", "-t", self.name, "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", "-200")

    def wait_prompt(self, prompt: str, timeout: float = WAIT) -> None:
        """Wait until the last non-empty line of the pane is ``prompt`` (nothing typed yet)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [line for line in self.screen().splitlines() if line.strip()]
            if lines and lines[-1].rstrip() == prompt.rstrip():
                return
            time.sleep(0.05)
        raise AssertionError(f"the prompt {prompt!r} did not come back:\n{self.screen()}")

    def wait_for(self, text: str, timeout: float = WAIT) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} did not appear; the pane shows:\n{self.screen()}")


def start_pane(socket: str, home: Path, *args: str, env: dict[str, str] | None = None) -> Pane:
    """``hermes-core ARGS`` in a new pane; ``EXIT=<code>`` is printed when it ends."""
    name = f"{args[0] if args else 'cli'}-{uuid.uuid4().hex[:6]}"
    env = {"HERMES_CORE_HOME": str(home), "NO_COLOR": "1", "TERM": "xterm-256color",
           **(env or {})}
    command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        shlex.quote(sys.executable), "-m", "hermes_core",
                        *(shlex.quote(a) for a in args), "; echo EXIT=$?; sleep 300"])
    subprocess.run([TMUX, "-L", socket, "new-session", "-d", "-s", name, "-x", "160", "-y", "50",
                    command], check=True, timeout=60, env={**os.environ, "TMUX": ""})
    return Pane(socket, name)
