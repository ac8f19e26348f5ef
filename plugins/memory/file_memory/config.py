"""The ``file_memory`` section of config.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CuratorConfig", "FileMemoryConfig"]


class CuratorConfig(BaseModel):
    """``file_memory.curator``: when the curator runs on its own, and what it aims for."""

    model_config = ConfigDict(extra="forbid")

    #: run the offline curator after every N-th session end (0: never on a session count)
    every_sessions: int = Field(default=0, ge=0, le=10_000)
    #: run it at a session end when a store is fuller than this share of its limit (0: never)
    fill_trigger: float = Field(default=0.0, ge=0.0, le=1.0)
    #: a proposal aims to leave each store at most this full (headroom for new facts)
    target_ratio: float = Field(default=0.8, gt=0.0, le=1.0)
    #: apply a background proposal at once (one version, which ``memory rollback`` undoes);
    #: when false it is only saved to memories/curation-proposal.json and logged
    auto_apply: bool = False
    #: token overlap (Jaccard, 0..1) from which two entries count as near duplicates
    near_duplicate: float = Field(default=0.8, gt=0.0, le=1.0)
    #: let the background run also ask the auxiliary model to merge and rewrite entries
    use_model: bool = False


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
    #: versions of the two stores kept in memories/history.jsonl (0: keep no history; rollback
    #: is then unavailable)
    history_limit: int = Field(default=200, ge=0, le=100_000)
    #: the curator (``hermes-core memory curate``) and its optional background run
    curator: CuratorConfig = Field(default_factory=CuratorConfig)
    #: rank entries by meaning as well as words when an embedder is active (``prefetch`` and the
    #: tool's ``search``); false: words only, and ``prefetch`` recalls nothing
    semantic: bool = True
    #: entries ``prefetch`` recalls for a user message at most (0: prefetch recalls nothing)
    recall_limit: int = Field(default=3, ge=0, le=20)
    #: the fused score (cosine + word bonus) an entry needs to be recalled by ``prefetch``
    recall_min_score: float = Field(default=0.35, ge=0.0, le=2.0)
    #: seconds ``prefetch`` waits for the user message's vector (then words only, this turn)
    recall_timeout: float = Field(default=0.2, gt=0.0, le=10.0)
