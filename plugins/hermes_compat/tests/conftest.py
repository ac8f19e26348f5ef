"""Shared helpers of the bridge's tests.

Every test runs with ``HOME`` pointed at an empty temporary folder (so a plugin that looks at
``~/.hermes`` or writes under ``~`` is caught) and ``$HERMES_CORE_HOME`` at another. The model's
words come from scripted transcripts (the only fake part); the Hermes plugins are the real ones
pip-installed in the ``hermes-compat`` tox env, or small Hermes-style plugins written in the
tests and dropped into the home's ``hermes-plugins/`` folder.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
import pytest
from hermes_core_hermes_compat import discovery

from hermes_core import replay as replay_module
from hermes_core.config import parse_config_text
from hermes_core.replay import RecordingHost, ReplayLLM, ReplayReport
from hermes_core.testing.replaying import TranscriptSource, transcript_from
from hermes_core.types import Message

REPO = Path(__file__).resolve().parents[3]
FIRST_WEEK = REPO / "examples" / "first-week.jsonl"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    user_home = tmp_path / "user-home"
    core_home = tmp_path / "core-home"
    user_home.mkdir()
    core_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("HERMES_CORE_HOME", str(core_home))
    for name in ("HERMES_HOME", "HERMES_CORE_HERMES_HOME", "ANTHROPIC_API_KEY",
                 "HERMES_CORE_DISABLE_PLUGINS", "HERMES_CORE_STRICT_PLUGINS", "ITSUKI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    discovery._entry_points.cache_clear()
    discovery._entry_point_candidates.cache_clear()
    yield {"home": user_home, "core": core_home}
    os.environ.pop("HERMES_HOME", None)


@pytest.fixture
def core_home(isolated: dict[str, Path]) -> Path:
    return isolated["core"]


@pytest.fixture
def user_home(isolated: dict[str, Path]) -> Path:
    return isolated["home"]


def listing(root: Path) -> set[str]:
    """Every file and folder under ``root`` (relative paths)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def drop_folder_plugin(core_home: Path, name: str, source: str) -> Path:
    """Write a Hermes folder plugin (``__init__.py`` = ``source``) into the drop-in folder."""
    folder = core_home / discovery.FOLDER_NAME / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return folder


class SpyLLM(ReplayLLM):
    """The scripted model, also keeping every request's messages (to look at the prompt)."""

    requests: list[list[Message]] = []

    def respond(self, *, system: str, messages: Any, max_tokens: int, **kw: Any) -> Any:
        SpyLLM.requests.append(list(messages))
        return super().respond(system=system, messages=messages, max_tokens=max_tokens, **kw)


def run(core_home: Path, transcript: TranscriptSource, *, providers: Sequence[str],
        engine: str | None = None, config: str = "", monkeypatch: pytest.MonkeyPatch
        ) -> ReplayReport:
    """Replay ``transcript`` with the bridge loaded as a plugin (Hermes plugins found through
    their real entry points and the drop-in folder) and ``providers`` selected."""
    loaded = parse_config_text(textwrap.dedent(config), core_home / "config.yaml")
    loaded.core.memory.providers = list(providers)
    if engine is not None:
        loaded.core.context.engine = engine
    loaded.core.llm.api_key = None
    SpyLLM.requests = []
    monkeypatch.setattr(replay_module, "ReplayLLM", SpyLLM)
    host = RecordingHost.load(core_home, config=loaded, entry_points=False, directories=False,
                              plugins=[("hermes_compat", bridge)])
    assert isinstance(host, RecordingHost)
    return replay_module.replay(transcript_from(transcript), host)


def recall_in_prompt(provider: str) -> list[str]:
    """The fenced recall blocks labelled ``provider`` in the user messages sent to the model."""
    from hermes_core.fence import FENCE_CLOSE, FENCE_OPEN

    out = []
    for request in SpyLLM.requests:
        for m in request:
            if m.role == "user" and FENCE_OPEN in m.content and provider in m.content:
                block = m.content[m.content.index(FENCE_OPEN):m.content.index(FENCE_CLOSE)]
                out.append(block)
    return out


def bridge_host(core_home: Path, config: str) -> RecordingHost:
    """A host with the bridge loaded as a plugin (Hermes plugins found through the drop-in
    folder) and ``config`` (config.yaml text); no model key."""
    loaded = parse_config_text(textwrap.dedent(config), core_home / "config.yaml")
    loaded.core.llm.api_key = None
    host = RecordingHost.load(core_home, config=loaded, entry_points=False, directories=False,
                              plugins=[("hermes_compat", bridge)])
    assert isinstance(host, RecordingHost)
    return host


class Words:
    """The model's words, scripted: "ok" (the one faked part)."""

    def respond(self, **kw: Any) -> Any:
        from hermes_core.llm import LLMResponse
        from hermes_core.types import Usage

        return LLMResponse(text="ok", usage=Usage(input_tokens=10, output_tokens=2))

    def complete(self, **kw: Any) -> str:
        return "ok"


def bridge_agent(core_home: Path, config: str, llm: Any = None) -> Any:
    """A real Agent over :func:`bridge_host`; ``llm`` (default :class:`Words`) gives the words."""
    from hermes_core.agent import Agent

    return Agent.create(bridge_host(core_home, config), llm or Words(), aux_llm=Words())
