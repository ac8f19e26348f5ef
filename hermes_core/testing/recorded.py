"""Model answers recorded once and replayed offline, looked up by the hash of the prompt.

A plugin that asks a model something in the background (derived memory, summaries) is tested
with a scripted model for its mechanics; what a *real* model answers is worth keeping too. Record
it once where a model is reachable, commit the file, and every later run replays it offline::

    recording = Recording()
    client = RecordingClient(real_client, recording)      # answers pass through and are kept
    ...                                                    # run the code under test with client
    recording.save("tests/data/my_recording.json")

    with MessagesAPIServer(Recording.load(path).responder) as api:   # offline, in CI
        ...                                                # the same prompts get the same words

The key is :func:`prompt_hash`: SHA-256 over the system text and each message's role and text
(canonical JSON), so the model name, ``max_tokens`` and the transport do not change it: a
recording made through one client replays through another. A prompt that was not recorded is
answered with HTTP 500 naming its hash (the code under test sees a failing model, and the test
says which prompt changed). The file is JSON: ``{"version": 1, "answers": {hash: text}}``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .messages_api import Failure, Reply

__all__ = ["Recording", "RecordingClient", "prompt_hash"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def prompt_hash(system: Any, messages: Sequence[Any]) -> str:
    """The key of one prompt: ``system`` a string or a list of text blocks, ``messages`` dicts
    of the Messages API (``role``, ``content``) or :class:`hermes_core.types.Message` objects."""
    turns = []
    for m in messages:
        if isinstance(m, dict):
            turns.append([str(m.get("role")), _text(m.get("content"))])
        else:
            turns.append([str(m.role), _text(m.content)])
    canonical = json.dumps({"system": _text(system), "messages": turns}, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Recording:
    """A mapping prompt hash -> the model's text, saved as JSON."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.answers: dict[str, str] = dict(answers or {})
        #: hashes asked for that were not recorded, in order
        self.missing: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(
                data.get("answers"), dict):
            raise ValueError(f"{path}: not a recording (expected {{\"version\": 1, "
                             "\"answers\": {hash: text}}})")
        return cls({str(k): str(v) for k, v in data["answers"].items()})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"version": 1, "answers": dict(sorted(
            self.answers.items()))}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    def add(self, key: str, text: str) -> None:
        with self._lock:
            self.answers[key] = text

    def responder(self, body: dict[str, Any]) -> Reply | Failure:
        """For :class:`~.messages_api.MessagesAPIServer`: the recorded answer to the request's
        prompt, or HTTP 500 naming the prompt's hash."""
        key = prompt_hash(body.get("system", ""), body.get("messages", []))
        with self._lock:
            text = self.answers.get(key)
            if text is None:
                self.missing.append(key)
        if text is None:
            return Failure(500, f"no recorded answer for prompt hash {key}: record it again")
        return Reply(text=text)


class RecordingClient:
    """A model client that passes every call to ``client`` and records each text answer."""

    def __init__(self, client: Any, recording: Recording) -> None:
        self.client = client
        self.recording = recording
        self.model = getattr(client, "model", None)

    def respond(self, *, system: str, messages: Sequence[Any], max_tokens: int,
                **kwargs: Any) -> Any:
        response = self.client.respond(system=system, messages=messages, max_tokens=max_tokens,
                                       **kwargs)
        self.recording.add(prompt_hash(system, messages), response.text)
        return response

    def complete(self, *, system: str, messages: Sequence[Any], max_tokens: int,
                 **kwargs: Any) -> str:
        text: str = self.client.complete(system=system, messages=messages,
                                         max_tokens=max_tokens, **kwargs)
        self.recording.add(prompt_hash(system, messages), text)
        return text
