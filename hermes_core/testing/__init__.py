"""The kit for plugin authors' tests.

For now it holds :class:`MessagesAPIServer`, a loopback Anthropic Messages API server that the
real anthropic SDK can talk to, answering from a script (see :mod:`.messages_api`).
"""

from __future__ import annotations

from .messages_api import Failure, MessagesAPIServer, RecordedRequest, Reply, ScriptItem

__all__ = ["Failure", "MessagesAPIServer", "RecordedRequest", "Reply", "ScriptItem"]
