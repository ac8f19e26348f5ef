"""Building blocks for context engines that compact a history by cutting out its middle.

The first-party ``compressor`` (which summarises the middle) and ``lossless`` (which archives it)
engines are built on these modules, and so can any third-party engine:

* :mod:`.settings` -- :class:`CompactionSettings`, the shared keys (threshold, protected head and
  tail, loop guards);
* :mod:`.policy` -- :class:`PolicyEngine`, a :class:`~hermes_core.kinds.ContextEngine` base that
  implements ``should_compress``/``update_from_response`` and the loop guards; subclasses supply
  :meth:`PolicyEngine.compact`;
* :mod:`.boundaries` -- where a compaction cuts (head, middle, tail, pinned messages);
* :mod:`.assemble` and :mod:`.repair` -- putting the result together and making it valid to send;
* :mod:`.markers` -- the texts a compaction leaves in a history and how to recognise them;
* :mod:`.tokens` -- cheap token estimates; :mod:`.fallback` -- the extractive summary;
  :mod:`.redact` -- secrets kept out of summaries; :mod:`.errors` -- input errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import ContextInputError, ContextOverflowError, check_history
    from .policy import CompactionPolicy, CompactionReport, PolicyEngine
    from .settings import CompactionSettings, check_fraction

__all__ = [
    "CompactionPolicy",
    "CompactionReport",
    "CompactionSettings",
    "ContextInputError",
    "ContextOverflowError",
    "PolicyEngine",
    "check_fraction",
    "check_history",
]

#: the names above, imported on first use: a module of the package (``redact``, ``tokens``) is
#: imported without the pydantic models of ``settings`` and ``policy``
_LAZY = {
    **dict.fromkeys(["ContextInputError", "ContextOverflowError", "check_history"], "errors"),
    **dict.fromkeys(["CompactionPolicy", "CompactionReport", "PolicyEngine"], "policy"),
    **dict.fromkeys(["CompactionSettings", "check_fraction"], "settings"),
}


def __getattr__(name: str) -> Any:
    from hermes_core._lazy import load

    return load(__name__, _LAZY, name, globals())
