"""The ``session_archive:`` section of config.yaml."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SessionArchiveConfig"]


class SessionArchiveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the database file; default ``$HERMES_CORE_HOME/state.db``
    path: str | None = None
    #: "full" (default): every append is on disk before it returns, as a commit should be.
    #: "normal": WAL without a sync per append, about 0.2 ms faster on this kind of disk; a crash
    #: of the process loses nothing, a power cut may lose the last appends.
    synchronous: Literal["normal", "full"] = "full"
    #: how long a write waits for another process's lock before failing, in seconds
    busy_timeout: float = Field(default=30.0, gt=0, le=600)
    #: sessions session_search returns when the model does not say (at most 5)
    max_sessions: int = Field(default=3, ge=1, le=5)
    #: characters of conversation session_search shows at most, shared by the sessions it returns
    window_chars: int = Field(default=100_000, ge=2_000, le=1_000_000)
    #: characters of JSON one session_search call returns at most (hits first, then windows);
    #: the model asks for more of one session with session_id
    result_chars: int = Field(default=16_000, ge=2_000, le=1_000_000)
    #: the best matches a search keeps for grouping and fusion; every match is ranked (BM25 on
    #: SQLite, ts_rank_cd on PostgreSQL) whatever their number
    candidates: int = Field(default=2000, ge=50, le=50_000)
    #: platforms whose sessions are listed after all others in search results
    demote_platforms: list[str] = Field(default_factory=lambda: ["cron"])
    #: semantic search: keep an int8 copy of each vector in memory for rescoring (~440 B per
    #: embedded message with the sign bits); false keeps only the sign bits (~56 B) and reads the
    #: few hundred candidates' float16 vectors from state.db per query (slower on a busy disk)
    vectors_in_memory: bool = True
    #: recall for every user message (the ``prefetch`` hook): the same search as session_search
    #: (hybrid when an embedder is active), its best hits added to the model's copy of the
    #: message. Off by default: the model asks with session_search when it needs the past
    prefetch: bool = False
    #: conversations prefetch shows at most
    prefetch_sessions: int = Field(default=2, ge=1, le=5)
    #: characters prefetch adds at most
    prefetch_chars: int = Field(default=1500, ge=200, le=20_000)
    #: summarise each found session with llm.auxiliary_model (or llm.model)
    summaries: bool = False
    summary_timeout: float = Field(default=30.0, gt=0, le=600)
    summary_concurrency: int = Field(default=3, ge=1, le=8)
    summary_max_tokens: int = Field(default=600, ge=50, le=8192)
    #: derived memory: the auxiliary model (llm.auxiliary_client / llm.auxiliary_model, else the
    #: main one) reads each settled turn in the background and writes dated facts (preferences,
    #: decisions, changing states) linked to their messages, found by session_search beside the
    #: messages. Off by default: it costs one model call per turn (see docs/session-archive.md)
    derive: bool = False
    #: seconds one derivation call may take; a slower model is tried again at the next turn
    derive_timeout: float = Field(default=60.0, gt=0, le=600)
    #: the most tokens one derivation answer may take
    derive_max_tokens: int = Field(default=1024, ge=100, le=8192)
    #: the user's newest current facts shown with each turn, so an update can supersede one
    derive_context_facts: int = Field(default=30, ge=0, le=200)
