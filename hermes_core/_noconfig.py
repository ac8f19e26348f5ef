"""``NoConfig``, the config model of a plugin kind class that names none.

Kept apart from :mod:`hermes_core.kinds` so the kernel's import does not load pydantic: the model
is imported the first time a kind's default ``Config`` is asked for (when a config section is
validated), and is public as ``hermes_core.NoConfig`` and ``hermes_core.kinds.NoConfig``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["NoConfig"]


class NoConfig(BaseModel):
    """The config model of a plugin that takes no settings: any key is refused."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
