"""The kit for plugin authors' tests.

* :class:`MessagesAPIServer`: a loopback Anthropic Messages API server that the real anthropic SDK
  can talk to, answering from a script (see :mod:`.messages_api`), and :class:`OpenAIAPIServer`,
  its OpenAI-compatible Chat Completions sibling for the real openai SDK (:mod:`.openai_api`);
* :mod:`.loopback`: the base both are built on, for a loopback fake of the service your plugin
  calls (a request log, any status, dropped or reset connections, delays cut short at stop);
* :func:`isolated_home`, :func:`make_host`, :func:`registered_plugin`, :func:`make_instance`:
  building blocks that work with or without pytest (see :mod:`.harness`);
* :class:`MemoryProviderConformance`, :class:`ContextEngineConformance`: the contract suites to
  subclass in your tests (see :mod:`.conformance`; they need pytest and jsonschema);
* :class:`CannedLLM`: an in-process model answering at once with fixed words (benchmarks);
* :class:`Recording`, :class:`RecordingClient`, :func:`prompt_hash`: model answers recorded once
  and replayed offline by prompt hash (see :mod:`.recorded`);
* :func:`run_replay`: run a scripted conversation through real plugins and get the replay
  report (see :mod:`.replaying`);
* the pytest plugin :mod:`.pytest_plugin` (fixtures ``hermes_home``, ``hermes_host``,
  ``hermes_messages_api``, ``hermes_replay``), registered through the ``pytest11`` entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .canned_llm import CannedLLM
    from .conformance import (
        ContextEngineConformance,
        MemoryProviderConformance,
        assert_well_formed,
        build_conversation,
    )
    from .forget_suite import ForgetConformance
    from .harness import isolated_home, make_host, make_instance, registered_plugin
    from .messages_api import (
        Broken,
        Failure,
        MessagesAPIServer,
        RecordedRequest,
        Reply,
        ScriptItem,
    )
    from .openai_api import OpenAIAPIServer
    from .recorded import Recording, RecordingClient, prompt_hash
    from .replaying import run_replay, transcript_from

__all__ = [
    "Broken",
    "CannedLLM",
    "ContextEngineConformance",
    "Failure",
    "ForgetConformance",
    "MemoryProviderConformance",
    "MessagesAPIServer",
    "OpenAIAPIServer",
    "RecordedRequest",
    "Recording",
    "RecordingClient",
    "Reply",
    "ScriptItem",
    "assert_well_formed",
    "build_conversation",
    "isolated_home",
    "make_host",
    "make_instance",
    "prompt_hash",
    "registered_plugin",
    "run_replay",
    "transcript_from",
]

#: where each name lives: every module loads on first use, so the pytest11 plugin (which imports
#: this package into every pytest run of a venv holding hermes-core) costs next to nothing, and
#: the suites (which import pytest) load only when asked
_HOME = {
    **dict.fromkeys(["ContextEngineConformance", "MemoryProviderConformance",
                     "assert_well_formed", "build_conversation"], "conformance"),
    "ForgetConformance": "forget_suite",
    **dict.fromkeys(["isolated_home", "make_host", "make_instance", "registered_plugin"],
                    "harness"),
    **dict.fromkeys(["Broken", "Failure", "MessagesAPIServer", "RecordedRequest", "Reply",
                     "ScriptItem"], "messages_api"),
    **dict.fromkeys(["run_replay", "transcript_from"], "replaying"),
    "CannedLLM": "canned_llm",
    "OpenAIAPIServer": "openai_api",
    **dict.fromkeys(["Recording", "RecordingClient", "prompt_hash"], "recorded"),
}


def __getattr__(name: str) -> Any:
    from .._lazy import load

    return load(__name__, _HOME, name, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
