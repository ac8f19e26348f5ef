"""Context windows of known models, and the one function the kernel uses to pick a window.

The table is deliberately small: it lists Anthropic model families by id prefix (ids carry a date
suffix, e.g. ``claude-sonnet-4-5-20250929``). ``llm.context_window`` in config.yaml always wins, so
a model missing here, a gateway with a smaller limit, or a long-context beta can be set by hand.

An unknown model gets :data:`DEFAULT_CONTEXT_WINDOW` (200,000 tokens, the window of every current
Claude model). That guess is documented rather than silent: :func:`window_source` says where a
figure came from, and ``hermes-core context estimate`` prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .config import CoreConfig, LLMSection

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "KNOWN_CONTEXT_WINDOWS",
    "context_window",
    "lookup_context_window",
    "window_source",
]

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


def context_window(config: CoreConfig | LLMSection | None = None, *, model: str | None = None) -> int:
    """The context window, in tokens, for ``model`` (default: ``llm.model``).

    ``llm.context_window`` overrides the table when it is set and ``model`` is the configured main
    model (an auxiliary model named explicitly is looked up on its own). Unknown models get
    :data:`DEFAULT_CONTEXT_WINDOW`.
    """
    llm = _llm_section(config)
    main_model = llm.model if llm is not None else None
    target = model or main_model
    if llm is not None and llm.context_window and (model is None or model == main_model):
        return int(llm.context_window)
    return lookup_context_window(target) or DEFAULT_CONTEXT_WINDOW


def window_source(
    config: CoreConfig | LLMSection | None = None, *, model: str | None = None
) -> Literal["config", "table", "default"]:
    """Where :func:`context_window` took its figure from, for diagnostics."""
    llm = _llm_section(config)
    main_model = llm.model if llm is not None else None
    if llm is not None and llm.context_window and (model is None or model == main_model):
        return "config"
    return "table" if lookup_context_window(model or main_model) else "default"
