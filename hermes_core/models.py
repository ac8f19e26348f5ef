"""Context windows of known models, and the one function the kernel uses to pick a window.

The table is deliberately small: it lists Anthropic model families by id prefix (ids carry a date
suffix, e.g. ``claude-sonnet-4-5-20250929``). ``llm.context_window`` in config.yaml always wins, so
a model missing here, a gateway with a smaller limit, or a long-context beta can be set by hand.

The model client is asked too (``LLMClient.context_window``): the ``anthropic`` client answers from
this table, other clients from their settings or their server. A model nobody knows gets
:data:`DEFAULT_CONTEXT_WINDOW` (200,000 tokens, the window of every current Claude model), never
silently: :func:`window_warning` is printed when chat, serve and replay start and by ``doctor``,
naming ``llm.context_window``; :func:`window_source` says where a figure came from, and
``hermes-core context estimate`` prints it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .config import CoreConfig, LLMSection
    from .host import PluginHost

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "KNOWN_CONTEXT_WINDOWS",
    "ModelCheck",
    "check_model",
    "context_window",
    "lookup_context_window",
    "resolve_window",
    "window_source",
    "window_warning",
]

log = logging.getLogger(__name__)

#: the window assumed for a model that is neither configured nor in the table
DEFAULT_CONTEXT_WINDOW = 200_000

#: id prefix -> context window in tokens; the longest matching prefix wins
KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-sonnet": 200_000,
    "claude-3-haiku": 200_000,
    "claude-2.1": 200_000,
    "claude-2.0": 100_000,
    "claude-instant-1": 100_000,
}


def lookup_context_window(model: str | None) -> int | None:
    """The table's window for ``model`` (longest prefix match), or ``None`` when unknown."""
    if not model:
        return None
    name = model.strip().lower()
    # "anthropic/claude-..." (gateway style) names the same model
    name = name.rsplit("/", 1)[-1]
    best: tuple[int, int] | None = None
    for prefix, window in KNOWN_CONTEXT_WINDOWS.items():
        if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return best[1] if best else None


def _llm_section(config: CoreConfig | LLMSection | None) -> LLMSection | None:
    if config is None:
        return None
    llm = getattr(config, "llm", None)
    return llm if llm is not None else config  # type: ignore[return-value]


WindowSource = Literal["config", "client", "table", "default"]


def resolve_window(config: CoreConfig | LLMSection | None = None, *, model: str | None = None,
                   client: Any = None) -> tuple[int | None, WindowSource]:
    """``(tokens, source)`` of ``model``'s context window (default: ``llm.model``).

    In order: ``llm.context_window`` (when ``model`` is the configured main model), the model
    client's ``context_window(model)``, the table of known models; ``(None, "default")`` when
    none knows it (the caller then uses :data:`DEFAULT_CONTEXT_WINDOW` and warns:
    :func:`window_warning`).
    """
    llm = _llm_section(config)
    main_model = llm.model if llm is not None else None
    target = model or main_model
    if llm is not None and llm.context_window and (model is None or model == main_model):
        return int(llm.context_window), "config"
    ask = getattr(client, "context_window", None)
    if callable(ask) and target:
        try:
            answer = ask(target)
        except Exception:  # a client's bug must not stop a turn: the next source answers
            log.debug("context_window(%r) of the model client raised", target, exc_info=True)
            answer = None
        if isinstance(answer, int) and not isinstance(answer, bool) and answer > 0:
            return answer, "client"
    known = lookup_context_window(target)
    return (known, "table") if known else (None, "default")


def context_window(config: CoreConfig | LLMSection | None = None, *, model: str | None = None,
                   client: Any = None) -> int:
    """The context window, in tokens, for ``model`` (see :func:`resolve_window`); an unknown
    model gets :data:`DEFAULT_CONTEXT_WINDOW` (and :func:`window_warning` says so)."""
    return resolve_window(config, model=model, client=client)[0] or DEFAULT_CONTEXT_WINDOW


def window_source(config: CoreConfig | LLMSection | None = None, *, model: str | None = None,
                  client: Any = None) -> WindowSource:
    """Where :func:`context_window` took its figure from, for diagnostics."""
    return resolve_window(config, model=model, client=client)[1]


def window_warning(config: CoreConfig | LLMSection | None, *, model: str | None = None,
                   client: Any = None) -> str | None:
    """The warning for a model whose window nobody knows (start-up and ``doctor``), else None."""
    _tokens, source = resolve_window(config, model=model, client=client)
    if source != "default":
        return None
    llm = _llm_section(config)
    target = model or (llm.model if llm is not None else None)
    name = getattr(client, "name", None) or (llm.client if llm is not None else "?")
    return (f"the context window of model {target!r} (client {name!r}) is unknown: compaction "
            f"assumes {DEFAULT_CONTEXT_WINDOW:,} tokens, which is wrong for most models that "
            "are not Claude. Set it: hermes-core config set llm.context_window TOKENS")


@dataclass(slots=True)
class ModelCheck:
    """What :func:`check_model` found about the model of one role."""

    client: str
    model: str
    #: why the client cannot answer at all (no key, a missing package), or None
    unavailable: str | None = None
    #: why the model cannot serve the agent (no tool calls), or None
    refused: str | None = None
    #: what should be fixed but does not stop a start (an unknown context window)
    warnings: list[str] = field(default_factory=list)


def check_model(host: PluginHost, role: str = "main") -> ModelCheck:
    """Check the model client of ``role`` before a front end starts (``chat``, ``serve``) and
    for ``doctor``: no network. Raises like :meth:`PluginHost.llm` for an unknown client name
    (the message lists the installed ones)."""
    client = host.llm(role)
    name, model = getattr(client, "name", "?"), client.model or host.config.core.llm.model
    check = ModelCheck(client=name, model=model, unavailable=client.unavailable())
    if not client.supports_tools(model):
        check.refused = (
            f"model {model!r} of client {name!r} does not support tool calls, which the agent "
            "needs (its memory and search are tools): choose a model that does "
            "(hermes-core config set llm.model NAME) or another client (llm.client)")
    warning = window_warning(host.config.core, model=model, client=client)
    if warning:
        check.warnings.append(warning)
    return check
