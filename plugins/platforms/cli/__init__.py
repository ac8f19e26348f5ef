"""The built-in terminal platform: ``hermes-core chat``.

``connect`` takes the kernel's dispatcher and returns at once; the front end then calls
:meth:`CliPlatform.run`, which holds the terminal until you leave. Every message goes through the
dispatcher, so the conversation is archived like any platform's and ``chat --continue`` resumes the
terminal session used last. Slash commands are in :mod:`.commands`, the loop in :mod:`.repl`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl
from hermes_core.errors import HermesCoreError
from hermes_core.kinds import Platform, PluginContext

from .commands import COMMANDS, HELP
from .config import CliConfig
from .repl import PLATFORM, Chat

if TYPE_CHECKING:
    from hermes_core.dispatch import ConversationDispatcher
    from hermes_core.host import PluginHost

__all__ = ["COMMANDS", "HELP", "PLATFORM", "Chat", "CliConfig", "CliPlatform", "register_platforms"]


class CliPlatform(Platform):
    """Chat in the terminal, replies streamed as they are produced."""

    name = "cli"
    Config = CliConfig
    description = "interactive terminal chat with streamed replies (hermes-core chat)"

    def __init__(self, config: CliConfig, context: PluginContext) -> None:
        super().__init__(config, context)
        self.settings: CliConfig = config
        self.dispatcher: ConversationDispatcher | None = None
        self.chat: Chat | None = None

    def dispatcher_options(self) -> dict[str, Any]:
        """Notices from the agent ("memory updated: ...") are shown in the terminal."""
        return {"agent_options": {"on_notice": self._notice}}

    def _notice(self, text: str) -> None:
        if self.chat is not None:
            self.chat.say(f"[{text}]", style="dim")

    @hookimpl
    def connect(self, dispatcher: ConversationDispatcher) -> None:
        self.dispatcher = dispatcher  # the terminal is served by run(), on the caller's thread

    @hookimpl
    def disconnect(self) -> None:
        if self.chat is not None:
            self.chat.running = False

    @hookimpl
    def send(self, conversation_key: str, text: str) -> None:
        """Print a message the agent starts itself, when the terminal chat is open."""
        if self.chat is not None and self.chat.key == conversation_key:
            self.chat.say(f"{self.settings.reply_label}{text}")

    def run(self, host: PluginHost, *, resume: bool = False,
            read: Callable[[str], str] = input, out: Any = None) -> Chat:
        """Hold the terminal: resume the latest terminal session when ``resume``, else start a
        new one; return when the user leaves."""
        if self.dispatcher is None:
            raise HermesCoreError("the cli platform is not connected; start it with "
                                  "hermes_core.dispatch.connect_platform(host, 'cli')")
        key = None
        chat_out = out
        if resume:
            key = self.dispatcher.resume_latest(PLATFORM)
        self.chat = Chat(host, self.dispatcher, self.settings,
                         key or f"cli:{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}",
                         read=read, out=chat_out)
        if resume and key is None:
            self.chat.say("No earlier terminal session; starting a new one.", style="warn")
        elif resume:
            agent = self.dispatcher.agent_of(PLATFORM, key or "")
            if agent is not None:
                turns = sum(1 for m in agent.history if m.role == "user")
                self.chat.say(f"Resumed session {agent.session.id} ({turns} earlier message(s)).",
                              style="info")
        self.chat.say("Type a message, /help for commands, Ctrl-D or /quit to leave.", style="dim")
        self.chat.loop()
        return self.chat


@hookimpl
def register_platforms(register: Callable[[type], None]) -> None:
    register(CliPlatform)
