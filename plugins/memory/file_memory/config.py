"""The ``file_memory`` section of config.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FileMemoryConfig"]


class FileMemoryConfig(BaseModel):
    """Settings of the built-in file memory (MEMORY.md / USER.md)."""

    model_config = ConfigDict(extra="forbid")

    #: budget of MEMORY.md, the agent's own notes, in characters (separators included);
    #: about 800 tokens of English at the default
    memory_char_limit: int = Field(default=2200, ge=10, le=1_000_000)
    #: budget of USER.md, the user's profile, in characters (separators included)
    user_char_limit: int = Field(default=1375, ge=10, le=1_000_000)
    #: show MEMORY.md in the system prompt and accept writes to target "memory"
    memory_enabled: bool = True
    #: show USER.md in the system prompt and accept writes to target "user"
    user_profile_enabled: bool = True
    #: failed consolidation attempts (over the limit, nothing matched) allowed in one turn; the
    #: reply to the last of them tells the model to stop retrying and answer the user
    max_consolidation_failures: int = Field(default=3, ge=1, le=50)
