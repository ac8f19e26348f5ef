"""The old home of the memory review, the pre-compaction flush and the skill nudge, kept for one
minor release: they moved to the first-party plugin ``hermes_core.plugins.memory_review`` (module
``curator``); ``CurationReport`` lives in :mod:`hermes_core.results`, ``carry_over`` and
``place_note`` (the ``on_post_compress`` notes of a compaction) in the kernel's compaction pass.
Each name here warns (DeprecationWarning) and returns the one from its new home."""

from __future__ import annotations

from ._lazy import moved

__all__ = [  # noqa: F822 (resolved by __getattr__)
    "DEFAULT_NUDGE",
    "FLUSH_PROMPT",
    "REVIEW_PROMPT",
    "REVIEW_SYSTEM",
    "CurationJob",
    "CurationReport",
    "Curator",
    "carry_over",
    "curation_tools",
    "fit_history",
    "make_job",
    "place_note",
    "review_session",
]

__getattr__ = moved(__name__, {
    **dict.fromkeys(__all__, "hermes_core.plugins.memory_review.curator"),
    "CurationReport": "hermes_core.results",
    "carry_over": "hermes_core._compacting",
    "place_note": "hermes_core._compacting",
})
