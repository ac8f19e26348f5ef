"""The core sections of config.yaml as pydantic models (``memory``, ``context``, ``llm``, ``hooks``,
``logging``, ``storage``, ``embeddings``, ``delegation``, ``plugins``) and their defaults.

Private: every name is imported from :mod:`hermes_core.config`, which reads, validates and redacts
the file with them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = [
    "CORE_SECTIONS",
    "DEFAULT_HOOK_TIMEOUTS",
    "ContextSection",
    "CoreConfig",
    "DelegationSection",
    "EmbeddingsSection",
    "HooksSection",
    "LLMSection",
    "LoggingSection",
    "MemorySection",
    "PluginsSection",
    "StorageSection",
    "StrictModel",
]


class StrictModel(BaseModel):
    # defer_build: the validators are built on first use, not at import, which keeps
    # `import hermes_core.host` cheap for commands that never read the config.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class MemorySection(StrictModel):
    #: memory providers to activate, in order; each is a name registered by a plugin
    providers: list[str] = Field(
        default_factory=lambda: ["file_memory", "session_archive", "skills"]
    )
    #: ``global``: one curated memory for everyone; ``user``: one per user key (the webhook's
    #: ``user`` field, the OS user in the chat); the archive's search sees the user's sessions only
    scope: Literal["global", "user"] = "global"
    #: per-provider deadline for ``prefetch``, in seconds
    prefetch_timeout: float = Field(default=0.3, gt=0, le=30)
    #: seconds the background memory worker may take to finish queued writes at shutdown
    worker_drain_timeout: float = Field(default=10.0, ge=0, le=600)
    #: a background memory review runs after every this many user turns (0: never)
    nudge_interval: int = Field(default=10, ge=0, le=10_000)
    #: no review and no pre-compaction flush before the conversation has this many user turns
    flush_min_turns: int = Field(default=6, ge=0, le=10_000)
    #: ask the model to save what is worth keeping before each compaction
    flush_before_compaction: bool = True
    #: wall-clock bound of one review or flush, in seconds (a late answer is discarded)
    review_timeout: float = Field(default=60.0, gt=0, le=600)
    #: model calls one review may make (a flush always makes one)
    review_max_calls: int = Field(default=3, ge=1, le=16)
    #: output tokens allowed per review or flush call
    review_max_tokens: int = Field(default=1024, ge=64, le=32_000)
    #: estimated tokens of conversation a review or flush reads (older messages are left out)
    review_input_tokens: int = Field(default=24_000, ge=1_000, le=1_000_000)

    @field_validator("providers")
    @classmethod
    def _no_duplicates(cls, value: list[str]) -> list[str]:
        seen = [name for i, name in enumerate(value) if name in value[:i]]
        if seen:
            raise ValueError(f"provider {seen[0]!r} is listed twice; list each provider once")
        return value


class ContextSection(StrictModel):
    #: the one context engine; a name registered by a plugin
    engine: str = "compressor"


class LLMSection(StrictModel):
    #: the model client (a name registered through ``register_llm_clients``): ``anthropic``,
    #: ``openai`` or a third-party one; ``hermes-core plugins list`` shows the installed ones
    client: str = "anthropic"
    #: the client of the auxiliary model (summaries, memory reviews); ``None``: ``client``
    auxiliary_client: str | None = None
    model: str = "claude-sonnet-4-6"
    #: the model for summaries and reviews; defaults to ``model``
    auxiliary_model: str | None = None
    #: a Messages-API-compatible endpoint; env ANTHROPIC_BASE_URL
    base_url: str | None = Field(default=None, json_schema_extra={"env": "ANTHROPIC_BASE_URL"})
    #: env ANTHROPIC_API_KEY; prefer the environment to writing it here
    api_key: SecretStr | None = Field(default=None, json_schema_extra={"env": "ANTHROPIC_API_KEY"})
    max_tokens: int = Field(default=4096, gt=0)
    #: the model's context window in tokens; ``None`` means the kernel's table for known models
    context_window: int | None = Field(default=None, gt=0)
    #: seconds one model call may take (at most a day: a socket cannot wait longer than the
    #: clock counts)
    timeout: float = Field(default=600.0, gt=0, le=86_400)
    max_retries: int = Field(default=2, ge=0, le=10)
    cache_ttl: Literal["5m", "1h"] = "5m"
    #: LLM calls one user turn may make (tool-loop iterations included)
    max_iterations: int = Field(default=90, ge=1, le=1000)

    @field_validator("base_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # '' = the client's default endpoint
        from .netaddr import http_url_problem

        problem = http_url_problem(value)
        if problem:
            raise ValueError(f"the endpoint (llm.base_url, or env ANTHROPIC_BASE_URL) {problem}")
        return value.strip()


#: default deadline of each bounded hook, in seconds (``hooks.timeouts`` overrides per hook)
DEFAULT_HOOK_TIMEOUTS: dict[str, float] = {
    # on the turn's path
    "on_message": 2.0,
    "system_prompt_block": 2.0,
    "should_compress": 1.0,
    "update_from_response": 1.0,
    "on_turn_start": 1.0,
    "on_prompt_assembled": 1.0,
    "on_pre_compress": 10.0,
    "compress": 180.0,
    "on_post_compress": 5.0,
    "get_tools": 5.0,
    "on_pre_tool_call": 5.0,  # around each tool call (a guard may block it)
    "on_post_tool_call": 5.0,
    "load_session": 10.0,
    # the agent's own points (plugin modules; memory_review implements all six)
    "on_turn_begin": 1.0,
    "tool_batch_note": 1.0,
    "on_turn_end": 2.0,
    "on_agent_reset": 2.0,
    # the flush's one model call is bounded by memory.review_timeout (60 s by default), then its
    # memory tool calls run: raise this with review_timeout
    "pre_compaction_flush": 90.0,
    # memory_review gives a running review what is left of its bound plus 1 s, within this
    "on_agent_close": 65.0,
    # on the background worker (a late provider delays only its own later calls)
    "sync_turn": 5.0,
    "on_turn_cancelled": 5.0,
    "queue_prefetch": 5.0,
    "on_session_switch": 5.0,
    "on_session_end": 5.0,
    "on_memory_write": 5.0,
    "on_delegation": 5.0,
    "forget": 30.0,
    "on_erasure": 2.0,
    # front ends and shutdown
    "connect": 30.0,
    "disconnect": 10.0,
    "send": 10.0,
    "shutdown": 5.0,
    # inspection commands
    "describe_context": 30.0,
    "doctor_checks": 60.0,  # each plugin's checks (an integrity check of a large archive)
}


class HooksSection(StrictModel):
    #: per-hook deadline in seconds, e.g. ``{on_message: 1.5}``; see DEFAULT_HOOK_TIMEOUTS
    timeouts: dict[str, float] = Field(default_factory=dict)
    #: deadline of one tool call, in seconds (the model gets a tool error when it passes)
    tool_timeout: float = Field(default=120.0, gt=0, le=3600)
    #: longest result of one tool call passed to the model, in characters (a longer one keeps
    #: its head and tail, with a note of what was left out)
    tool_result_chars: int = Field(default=50_000, ge=1_000, le=10_000_000)

    @field_validator("timeouts")
    @classmethod
    def _known_hooks(cls, value: dict[str, float]) -> dict[str, float]:
        import difflib

        for name, seconds in value.items():
            if name not in DEFAULT_HOOK_TIMEOUTS:
                close = difflib.get_close_matches(name, list(DEFAULT_HOOK_TIMEOUTS), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"{name!r} is not a bounded hook; {hint}"
                                 f"bounded hooks: {', '.join(sorted(DEFAULT_HOOK_TIMEOUTS))}")
            if not 0 < seconds <= 3600:
                raise ValueError(f"timeouts.{name} must be > 0 and <= 3600 seconds, got {seconds}")
        return value

    def timeout(self, hook: str) -> float:
        return self.timeouts.get(hook, DEFAULT_HOOK_TIMEOUTS.get(hook, 10.0))


class LoggingSection(StrictModel):
    #: level of the log file ``$HERMES_CORE_HOME/logs/hermes-core.log`` (``serve --log-level``)
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: write the log file at all
    file: bool = True
    #: bytes per file before it rotates, and how many old files are kept
    max_bytes: int = Field(default=1_000_000, ge=10_000, le=1_000_000_000)
    backups: int = Field(default=5, ge=0, le=100)
class StorageSection(StrictModel):
    #: where the built-in stores keep their data: unset = SQLite files in the home;
    #: ``postgresql://user:password@host:5432/dbname`` = one PostgreSQL database (docs/storage.md);
    #: env HERMES_CORE_STORAGE_URL
    url: str | None = Field(default=None, json_schema_extra={"env": "HERMES_CORE_STORAGE_URL"})

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from .storage.errors import StorageError
        from .storage.url import parse_storage_url

        try:
            return parse_storage_url(value).url
        except StorageError as exc:
            raise ValueError(str(exc)) from None

class EmbeddingsSection(StrictModel):
    #: the embedder for semantic search: a name registered by a plugin, ``auto`` (the local
    #: all-MiniLM-L6-v2 embedder when ``hermes-core-kernel[embeddings]`` is installed, else none) or
    #: ``none`` (word search only)
    embedder: str = "auto"
    #: seconds one embedding call may take before semantic search is skipped for that call
    timeout: float = Field(default=10.0, gt=0, le=600)
    #: texts embedded per call by background indexing
    batch_size: int = Field(default=32, ge=1, le=1024)

    @field_validator("embedder")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("give an embedder name, 'auto' or 'none'")
        return value


class DelegationSection(StrictModel):
    #: offer the ``delegate_task`` tool; ``false`` leaves it out of every session's tool list
    enabled: bool = True
    #: how deep children may delegate again: 1 = the main agent's children cannot delegate
    max_depth: int = Field(default=1, ge=1, le=5)
    #: children one ``delegate_task`` call runs at once; further tasks of the call are refused
    max_parallel: int = Field(default=3, ge=1, le=16)
    #: tools a child may use (names); ``None`` = every tool of the parent's session
    allowed_tools: list[str] | None = None
    #: model calls one child may make (it also spends the parent's turn budget, shared)
    child_max_iterations: int = Field(default=30, ge=1, le=1000)
    #: seconds a ``delegate_task`` call waits for its children before cancelling the rest
    timeout: float = Field(default=100.0, gt=0, le=3600)


class PluginsSection(StrictModel):
    #: plugin names (or distribution names) never imported
    disabled: list[str] = Field(default_factory=list)
    #: when set, an allow-list: only these plugins (names or distribution names) are imported;
    #: ``disabled`` still applies on top of it
    enabled_only: list[str] | None = None


class CoreConfig(StrictModel):
    memory: MemorySection = Field(default_factory=MemorySection)
    context: ContextSection = Field(default_factory=ContextSection)
    llm: LLMSection = Field(default_factory=LLMSection)
    plugins: PluginsSection = Field(default_factory=PluginsSection)
    hooks: HooksSection = Field(default_factory=HooksSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    storage: StorageSection = Field(default_factory=StorageSection)
    embeddings: EmbeddingsSection = Field(default_factory=EmbeddingsSection)
    delegation: DelegationSection = Field(default_factory=DelegationSection)


CORE_SECTIONS: tuple[str, ...] = tuple(CoreConfig.model_fields)
