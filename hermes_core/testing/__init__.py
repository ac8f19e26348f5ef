"""The kit for plugin authors' tests.

* :class:`MessagesAPIServer`: a loopback Anthropic Messages API server that the real anthropic SDK
  can talk to, answering from a script (see :mod:`.messages_api`);
* :func:`isolated_home`, :func:`make_host`, :func:`registered_plugin`, :func:`make_instance`:
  building blocks that work with or without pytest (see :mod:`.harness`);
* :class:`MemoryProviderConformance`, :class:`ContextEngineConformance`: the contract suites to
  subclass in your tests (see :mod:`.conformance`; they need pytest and jsonschema);
* :class:`CannedLLM`: an in-process model answering at once with fixed words (benchmarks);
* :func:`run_replay`: run a scripted conversation through real plugins and get the replay
  report (see :mod:`.replaying`);
* the pytest plugin :mod:`.pytest_plugin` (fixtures ``hermes_home``, ``hermes_host``,
  ``hermes_messages_api``, ``hermes_replay``), registered through the ``pytest11`` entry point.
"""

from __future__ import annotations

from typing import Any

from .harness import isolated_home, make_host, make_instance, registered_plugin
from .messages_api import Broken, Failure, MessagesAPIServer, RecordedRequest, Reply, ScriptItem

__all__ = [
    "Broken",
    "CannedLLM",
    "ContextEngineConformance",
    "Failure",
    "ForgetConformance",
    "MemoryProviderConformance",
    "MessagesAPIServer",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "assert_well_formed",
    "build_conversation",
    "isolated_home",
    "make_host",
    "make_instance",
    "registered_plugin",
    "run_replay",
    "transcript_from",
]

_CONFORMANCE = {"ContextEngineConformance", "MemoryProviderConformance", "assert_well_formed",
                "build_conversation"}
_REPLAYING = {"run_replay", "transcript_from"}


def __getattr__(name: str) -> Any:
    # The suites import pytest; load them only when asked, so the rest works without pytest.
    if name in _CONFORMANCE:
        from . import conformance

        return getattr(conformance, name)
    if name == "ForgetConformance":
        from .forget_suite import ForgetConformance

        return ForgetConformance
    if name in _REPLAYING:  # the agent loop is loaded only by tests that replay
        from . import replaying

        return getattr(replaying, name)
    if name == "CannedLLM":
        from .canned_llm import CannedLLM

        return CannedLLM
    raise AttributeError(f"module 'hermes_core.testing' has no attribute {name!r}")
