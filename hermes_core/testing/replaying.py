"""The replay helper: run a scripted conversation through real plugins in a test.

A replay is the cheapest end-to-end check a plugin author has: the model's words come from the
script (the only fake part), while the memory providers, the context engine and the tools are the
real plugins, doing real work in an isolated home. :func:`run_replay` returns the same
:class:`~hermes_core.replay.ReplayReport` that ``hermes-core replay --json`` prints, so a test can
assert on recall, memory writes, compactions and prompt stability turn by turn::

    report = run_replay(home, [("I use Helix as my editor", "Noted."),
                               ("which editor do I use?", "Helix.")],
                        plugins=[("glossary", glossary_module)],
                        providers=["file_memory", "glossary"])
    assert "Helix" in report.turns[1]["prefetch"][0]["text"]

The pytest plugin exposes it as the ``hermes_replay`` fixture, bound to ``hermes_home``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import load_config, parse_config_text
from ..replay import RecordingHost, ReplayReport, Transcript, load_transcript, parse_transcript, replay

__all__ = ["ScriptTurn", "TranscriptSource", "run_replay", "transcript_from"]

#: one turn written inline: ``(user, assistant)``, or a ``{"user": ..., "assistant": ...}`` mapping
#: that may also carry ``"tool_calls"`` (a list of ``{"name", "arguments"}``) and ``"new_session"``
ScriptTurn = tuple[str, str] | Mapping[str, Any]
#: a transcript file, its parsed form, raw JSONL objects, or turns written inline
TranscriptSource = str | Path | Transcript | Sequence[ScriptTurn]


def transcript_from(source: TranscriptSource) -> Transcript:
    """Turn any :data:`TranscriptSource` into a :class:`~hermes_core.replay.Transcript`.

    Inline turns become transcript lines: a turn with ``tool_calls`` gets one response calling
    them, then a final response with the assistant text; tools are *run* by the plugins that own
    them, as in any replay. Raises :class:`~hermes_core.replay.ReplayError` naming the bad line.
    """
    if isinstance(source, Transcript):
        return source
    if isinstance(source, (str, Path)):
        return load_transcript(source)
    lines: list[str] = []
    for index, item in enumerate(source, start=1):
        lines.extend(json.dumps(obj, ensure_ascii=False) for obj in _objects(item, index))
    return parse_transcript(lines, name="<inline transcript>")


def _objects(item: object, index: int) -> list[dict[str, Any]]:
    if isinstance(item, tuple):
        if len(item) != 2 or not all(isinstance(part, str) for part in item):
            raise TypeError(f"inline turn {index}: a tuple must be (user text, assistant text)")
        return [{"role": "user", "content": item[0]}, {"role": "assistant", "content": item[1]}]
    if not isinstance(item, Mapping):
        raise TypeError(f"inline turn {index}: expected a (user, assistant) tuple or a mapping, "
                        f"got {type(item).__name__}")
    if "role" in item or "event" in item or "meta" in item:
        return [dict(item)]  # already a transcript line
    if not isinstance(item.get("user"), str):
        raise TypeError(f"inline turn {index}: the mapping needs a 'user' text")
    out: list[dict[str, Any]] = []
    if item.get("new_session"):
        out.append({"event": "new_session"})
    out.append({"role": "user", "content": item["user"]})
    calls = item.get("tool_calls") or []
    if calls:
        out.append({"role": "assistant", "content": "", "tool_calls": list(calls)})
    out.append({"role": "assistant", "content": str(item.get("assistant", ""))})
    return out


def run_replay(
    home: Path,
    transcript: TranscriptSource,
    *,
    plugins: Iterable[tuple[str, object]] = (),
    providers: Sequence[str] | None = None,
    engine: str | None = None,
    config: str | None = None,
    builtins: bool = True,
    settle: bool = True,
) -> ReplayReport:
    """Replay ``transcript`` in ``home`` and return the report (the host is shut down after).

    ``plugins`` registers throwaway plugins as ``(name, module-or-object)``; ``providers``
    replaces ``memory.providers`` and ``engine`` ``context.engine``; ``config`` is YAML text used
    instead of ``home/config.yaml``. Entry points and directory plugins stay off, so the result
    never depends on what is installed. No API key is used: a summariser that would call the
    model takes its offline path, as in ``hermes-core replay``. With ``settle`` (the default)
    background hook work finishes between turns, so recall is deterministic.
    """
    parsed = transcript_from(transcript)
    loaded = (parse_config_text(textwrap.dedent(config), home / "config.yaml") if config is not None
              else load_config(home))
    core = loaded.core
    if providers is not None:
        core.memory.providers = list(providers)
    if engine is not None:
        core.context.engine = engine
    core.llm.api_key = None
    host = RecordingHost.load(home, config=loaded, builtins=builtins, entry_points=False,
                              directories=False, plugins=plugins)
    assert isinstance(host, RecordingHost)
    return replay(parsed, host, settle=settle)
