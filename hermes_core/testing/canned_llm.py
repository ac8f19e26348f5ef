"""An in-process model that answers at once with the same words: for benchmarks and for tests
where the HTTP round trip is not the subject (use :class:`~.messages_api.MessagesAPIServer` with
the real SDK when it is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..llm import LLMResponse
from ..types import Usage

__all__ = ["CannedLLM"]


class CannedLLM:
    """A :class:`~hermes_core.llm.ChatLLM` whose every answer is ``text`` with ``usage``.

    With ``on_text`` the text is streamed in pieces of ``chunk`` characters, as a real stream
    would arrive. ``calls`` counts the requests. The words are the only fake part.
    """

    def __init__(self, text: str = "ok", *, usage: Usage | None = None, chunk: int = 16) -> None:
        self.text = text
        self.chunk = max(1, chunk)
        self.calls = 0
        self.response = LLMResponse(text=text, usage=usage or Usage(input_tokens=1000, output_tokens=5),
                                    stop_reason="end_turn")

    def respond(self, *, on_text: Callable[[str], None] | None = None, **kwargs: Any) -> LLMResponse:
        self.calls += 1
        if on_text is not None:
            for i in range(0, len(self.text), self.chunk):
                on_text(self.text[i:i + self.chunk])
        return self.response

    def complete(self, **kwargs: Any) -> str:
        self.calls += 1
        return self.text
