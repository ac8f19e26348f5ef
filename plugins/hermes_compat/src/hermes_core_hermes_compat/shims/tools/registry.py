"""Stand-in for ``tools.registry``: the helper plugins use to answer a tool call with an error."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["tool_error"]


def tool_error(message: object, **extra: Any) -> str:
    """A tool result (JSON text) reporting ``message`` as the error, with ``extra`` fields."""
    payload: dict[str, Any] = {"error": str(message)}
    payload.update(extra)
    return json.dumps(payload, ensure_ascii=False)
