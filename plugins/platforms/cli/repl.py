"""The interactive loop of ``hermes-core chat``: read a line, stream the reply, repeat.

A line starting with ``/`` is a command (:mod:`.commands`); anything else is a message for the
agent, sent through the kernel's dispatcher like any platform's, so the terminal conversation is
archived, resumable (``--continue``) and searchable like the others.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click

from hermes_core.dispatch import TurnFailed
from hermes_core.types import IncomingMessage

from .commands import run_command

if TYPE_CHECKING:
    from hermes_core.agent import Agent
    from hermes_core.dispatch import ConversationDispatcher
    from hermes_core.host import PluginHost

    from .config import CliConfig

__all__ = ["PLATFORM", "Chat"]

PLATFORM = "cli"
T = TypeVar("T")
_STYLES: dict[str, dict[str, Any]] = {
    "info": {"fg": "cyan"}, "warn": {"fg": "yellow"}, "error": {"fg": "red"},
    "dim": {"dim": True}, "reply": {"fg": "green", "bold": True},
}


def os_user() -> str | None:
    """The OS user running the chat, as a user key (None when it has no usable name)."""
    import getpass

    from hermes_core.users import UserKeyError, check_user_key

    try:
        return check_user_key(getpass.getuser())
    except (UserKeyError, OSError, KeyError):
        return None


class Chat:
    """One terminal conversation over a dispatcher."""

    def __init__(self, host: PluginHost, dispatcher: ConversationDispatcher, settings: CliConfig,
                 key: str, *, read: Callable[[str], str] = input, out: TextIO | None = None) -> None:
        self.host = host
        self.dispatcher = dispatcher
        self.settings = settings
        self.key = key
        self.read = read
        self.out = out or sys.stdout
        self.running = True
        self.color = settings.color and "NO_COLOR" not in os.environ and self.out.isatty()

    # ------------------------------------------------------------------------------ output

    def write(self, text: str, style: str | None = None) -> None:
        if style and self.color:
            text = click.style(text, **_STYLES[style])
        self.out.write(text)
        self.out.flush()

    def say(self, line: str, style: str | None = None) -> None:
        self.write(line, style)
        self.write("\n")

    # ---------------------------------------------------------------------------- the loop

    def with_agent(self, fn: Callable[[Agent], T]) -> T:
        """Run ``fn`` on the conversation's agent, in line with its turns."""
        return self.dispatcher.call(PLATFORM, self.key, fn)

    def loop(self) -> None:
        """Read and answer until /quit, end of input (Ctrl-D) or ``running`` turns false."""
        line_editing = False
        with contextlib.suppress(ImportError):  # not on every platform (e.g. Windows)
            import readline  # noqa: F401  (line editing and history for input())

            line_editing = True
        with _keys_typed_ahead_kept(self.read is input and line_editing):
            self._loop()

    def _loop(self) -> None:
        while self.running:
            try:
                line = self.read(self.settings.prompt)
            except EOFError:
                self.write("\n")
                break
            except KeyboardInterrupt:
                self.say("\n(Ctrl-D or /quit leaves)", style="dim")
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                run_command(self, line)
            else:
                self.turn(line)

    def turn(self, text: str) -> None:
        """Send one message and stream the reply."""
        with _log_lines_after_the_reply():
            self._turn(text)

    def _turn(self, text: str) -> None:
        self.write(self.settings.reply_label, style="reply")
        try:
            incoming = IncomingMessage(PLATFORM, self.key, text, user_id=os_user())
            for piece in self.dispatcher.stream(incoming):
                self.write(piece)
            self.write("\n")
        except TurnFailed as exc:
            self.write("\n")
            self.say(f"error: {exc}", style="error")
            if exc.failure in ("auth", "not_configured"):
                self.say("Check ANTHROPIC_API_KEY (or llm.api_key) and llm.base_url.", style="warn")
        except KeyboardInterrupt:
            # The turn runs on the dispatcher's thread: it finishes and is archived regardless.
            self.say("\n(interrupted: the reply is still being produced and stored)", style="dim")


@contextlib.contextmanager
def _log_lines_after_the_reply() -> Iterator[None]:
    """Hold the log lines meant for the terminal until the reply's line has ended.

    A warning logged on any thread while a reply streams (a slow embedder, a late provider) would
    otherwise land in the middle of the reply. The log file gets it at once (its handler is not
    held); the terminal shows it right after the reply.
    """
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        held.append(record)
        return False

    for handler in handlers:
        handler.addFilter(hold)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(hold)
        for record in held:
            for handler in handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)


@contextlib.contextmanager
def _keys_typed_ahead_kept(enabled: bool) -> Iterator[None]:
    """Keep keys typed while a reply streams exactly as typed, Ctrl-D included.

    readline switches the terminal to non-canonical mode only while it reads a line. Keys typed
    in between (during a turn, or in the instant between a reply and the next prompt) reach the
    terminal in canonical mode, where Ctrl-D on an empty line becomes an end-of-file marker that
    readline never sees once it switches modes: Ctrl-D right after a reply was ignored. With
    canonical mode off for the whole chat (echo and Ctrl-C untouched), those keys are queued as
    plain bytes, and readline reads the Ctrl-D as the end of input. Restored on the way out.
    """
    try:
        import termios
    except ImportError:  # pragma: no cover - not POSIX
        enabled = False
    fd = sys.stdin.fileno() if enabled and sys.stdin.isatty() else None
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    raw = termios.tcgetattr(fd)
    raw[3] &= ~termios.ICANON  # lflag
    raw[6][termios.VMIN] = 1
    raw[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, raw)  # TCSANOW: keys already typed are kept
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
