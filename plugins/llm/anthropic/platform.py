"""The Messages API's own context management, as the ``anthropic`` client sends it.

A context engine asks for it through :meth:`hermes_core.kinds.LLMClient.platform_context`; this
module checks the edit names against the installed SDK's types (the ``Edit`` union of
``BetaContextManagementConfigParam``), knows the beta header each edit needs, and tells a refusal
of the feature (a bad request that goes through without it) from other bad requests.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import typing
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from hermes_core.errors import ConfigError
from hermes_core.llm import LLMError, LLMFailure

__all__ = ["PlatformContext", "beta_for", "sdk_edit_names"]

#: the ``anthropic-beta`` value each edit needs (the names of the SDK's ``AnthropicBetaParam``)
_BETAS = {
    "clear_tool_uses_20250919": "context-management-2025-06-27",
    "clear_thinking_20251015": "context-management-2025-06-27",
    "compact_20260112": "compact-2026-01-12",
}


@functools.lru_cache(maxsize=1)
def sdk_edit_names() -> tuple[str, tuple[str, ...]]:
    """``(SDK version, edit type names its types define)``: ``()`` for an SDK without
    context management."""
    import anthropic

    version = str(getattr(anthropic, "__version__", "unknown"))
    try:
        from anthropic.types.beta.beta_context_management_config_param import Edit
    except ImportError:
        return version, ()
    names: list[str] = []
    for edit in typing.get_args(Edit):
        literal = typing.get_type_hints(edit).get("type")
        names.extend(str(arg) for arg in typing.get_args(literal))
    return version, tuple(names)


def beta_for(edit_type: str) -> str:
    return _BETAS[edit_type]


def check_edits(edits: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``edits`` as plain dicts, or :class:`ConfigError` naming an edit the installed SDK (or
    this client) does not know and the SDK needed."""
    version, known = sdk_edit_names()
    out = []
    for edit in edits:
        kind = edit.get("type") if isinstance(edit, dict) else None
        if not isinstance(kind, str):
            raise ConfigError(f"a context-management edit needs a 'type' name, got {edit!r}")
        if kind not in known:
            listed = ", ".join(known) or "none"
            raise ConfigError(
                f"platform context feature {kind!r} is not defined by the installed anthropic SDK "
                f"{version} (it defines: {listed}); it needs a newer anthropic SDK than {version} "
                "(pip install -U anthropic) that defines it, or remove it from "
                "compression.platform.features")
        if kind not in _BETAS:
            raise ConfigError(
                f"platform context feature {kind!r} is defined by the anthropic SDK {version} but "
                f"this hermes-core does not know its beta header; known: {', '.join(_BETAS)}")
        out.append(dict(edit))
    return out


log = logging.getLogger("hermes_core.plugins.anthropic")


class PlatformContext:
    """The edits one client sends, until the server refuses them, and who to tell then (every
    engine sharing the client: a delegated child's compressor asks too). Engines are held
    weakly, so the engines of finished children do not pile up."""

    def __init__(self, edits: list[dict[str, Any]]) -> None:
        self.edits = edits
        self.betas = sorted({beta_for(str(e["type"])) for e in edits})
        self.refused: str | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], Callable[[str], None] | None]] = []

    def listen(self, on_refused: Callable[[str], None]) -> None:
        ref: Callable[[], Callable[[str], None] | None]
        if inspect.ismethod(on_refused):
            ref = weakref.WeakMethod(on_refused)
        else:
            ref = functools.partial(lambda fn: fn, on_refused)
        with self._lock:
            self._listeners = [r for r in self._listeners if r() is not None] + [ref]

    @property
    def active(self) -> bool:
        return self.refused is None and bool(self.edits)

    def fields(self) -> dict[str, Any]:
        """The keyword arguments the SDK's beta ``messages.create`` takes for them."""
        return {"context_management": {"edits": [dict(e) for e in self.edits]},
                "betas": list(self.betas)}

    def may_be_refusal(self, error: LLMError) -> bool:
        """Whether ``error`` (of a request that carried the edits) may refuse the feature: a bad
        request (400/404/413/422). The client proves it by sending the request again without
        the edits: when that one goes through, the edits were the problem (decided by outcome,
        never by the error's wording)."""
        return error.failure is LLMFailure.BAD_REQUEST

    def refuse(self, error: LLMError) -> None:
        """Stop sending the edits and tell the engine (once)."""
        with self._lock:
            if self.refused is not None:
                return
            self.refused = str(error)
            listeners = [fn for ref in self._listeners if (fn := ref()) is not None]
        why = (f"the Messages API refused the platform context management "
               f"({', '.join(str(e['type']) for e in self.edits)}): {error}")
        for fn in listeners:
            try:
                fn(why)
            except Exception:  # an engine's callback must not fail the call that succeeded
                log.exception("on_refused raised")
