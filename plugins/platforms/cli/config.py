"""The ``cli:`` section of config.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CliConfig"]


class CliConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the prompt shown before each of your messages
    prompt: str = Field(default="you> ", max_length=40)
    #: the label printed before each reply
    reply_label: str = Field(default="hermes> ", max_length=40)
    #: colours on a terminal (off when output is not a terminal or NO_COLOR is set)
    color: bool = True
    #: sessions /search lists at most
    search_limit: int = Field(default=3, ge=1, le=5)
