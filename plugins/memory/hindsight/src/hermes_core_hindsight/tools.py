"""The model's tools: ``hindsight_retain``, ``hindsight_recall``, ``hindsight_reflect``.

Each tool talks to the server directly (not through the spool): the model asked, so it
should learn whether it worked. Failures raise :class:`~hermes_core.errors.ToolError` with a message
the model can act on; the kernel turns that into an error result. Successes are small JSON objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.types import ToolContext

from .client import HindsightError, HindsightNoLLM, HindsightUnavailable, has_words
from .config import FactType

if TYPE_CHECKING:
    from .provider import HindsightMemory

__all__ = ["RecallInput", "ReflectInput", "RetainInput", "build_tools"]


def _needs_words(value: str) -> str:
    if not has_words(value):
        raise ValueError("must contain at least one letter or digit")
    return value


#: text the server can search by: it refuses queries without a letter or digit
Words = Annotated[str, AfterValidator(_needs_words)]


class RetainInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: Words = Field(min_length=1, max_length=100_000,
                           description="The fact or event to remember, as a self-contained sentence.")
    context: str | None = Field(default=None, max_length=2_000,
                                description="Optional: where it comes from (e.g. 'code review').")
    tags: list[str] = Field(default_factory=list, max_length=16,
                            description="Optional tags to filter recalls by later.")


class RecallInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Words = Field(min_length=1, max_length=2_000,
                         description="What to look for, in natural language.")
    max_results: int = Field(default=8, ge=1, le=50, description="How many memories at most.")
    types: list[FactType] | None = Field(
        default=None, description="Optional: 'world', 'experience' and/or 'observation'.")


class ReflectInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Words = Field(min_length=1, max_length=4_000,
                         description="The question to answer from everything remembered.")
    context: str | None = Field(default=None, max_length=4_000,
                                description="Optional: what the answer is for.")


def _failed(action: str, exc: HindsightError) -> ToolError:
    hint = ("the memory server is unreachable right now; carry on without it"
            if isinstance(exc, HindsightUnavailable) else "check the arguments")
    return ToolError(f"{action} failed: {exc} ({hint})")


def build_tools(provider: HindsightMemory) -> list[Tool]:
    """The three tools, bound to ``provider``."""
    config = provider.config

    def retain(args: RetainInput, ctx: ToolContext) -> dict[str, Any]:
        item: dict[str, Any] = {"content": args.content,
                                "tags": [*provider.session_tags(ctx.session), "source:tool",
                                         *args.tags]}
        if args.context:
            item["context"] = args.context
        bank = provider.bank_for(ctx.session)
        try:
            provider.client.retain(bank, [item], async_=config.retain_async,
                                   operation_id=str(uuid.uuid4()), timeout=config.retain_timeout)
        except HindsightError as exc:
            raise _failed("hindsight_retain", exc) from None
        return {"stored": True, "bank": bank}

    def recall(args: RecallInput, ctx: ToolContext) -> dict[str, Any]:
        try:
            types: list[str] = list(args.types) if args.types else provider.recall_types()
            memories = provider.client.recall(
                provider.bank_for(ctx.session), args.query, types=types,
                budget=config.recall_budget,
                max_tokens=config.recall_max_tokens, timeout=config.recall_timeout)
        except HindsightError as exc:
            raise _failed("hindsight_recall", exc) from None
        return {"results": [m.as_dict() for m in memories[: args.max_results]],
                "types": types}

    def reflect(args: ReflectInput, ctx: ToolContext) -> dict[str, Any]:
        try:
            text = provider.client.reflect(provider.bank_for(ctx.session), args.query,
                                           budget=config.recall_budget,
                                           context=args.context, timeout=config.reflect_timeout)
        except HindsightNoLLM:
            raise ToolError(
                "hindsight_reflect is unavailable: this Hindsight server runs without an LLM "
                "(HINDSIGHT_API_LLM_PROVIDER=none), so it cannot reason over memories. Use "
                "hindsight_recall to fetch the relevant memories and answer from them yourself."
            ) from None
        except HindsightError as exc:
            raise _failed("hindsight_reflect", exc) from None
        return {"answer": text}

    described: list[tuple[str, Callable[..., Any], type[BaseModel], bool, str]] = [
        ("hindsight_retain", retain, RetainInput, False,
         "Store a durable fact or event in long-term memory (Hindsight), searchable in every "
         "future session. Conversations are already retained automatically: use this only for "
         "something stated outside the conversation or worth recording on its own."),
        ("hindsight_recall", recall, RecallInput, True,
         "Search long-term memory (Hindsight) for facts and past events relevant to a query; "
         "matches by meaning, not only by words. Returns the memories, best first."),
        ("hindsight_reflect", reflect, ReflectInput, True,
         "Ask the memory server to answer a question by reasoning over everything it remembers "
         "(needs an LLM on the server; if it has none, use hindsight_recall)."),
    ]
    return [Tool(name=name, description=description, handler=handler, input_model=model,
                 parallel_safe=parallel) for name, handler, model, parallel, description in described]
