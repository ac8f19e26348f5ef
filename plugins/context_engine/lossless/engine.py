"""The ``lossless`` context engine: compacted turns stay retrievable instead of summarised away.

The idea is that of lossless context management (LCM): when the history must shrink, the middle
is moved verbatim into an archive (:mod:`.store`) and replaced in the live context by an *index*
message listing the archived spans with a mechanical digest of each. The model gets two tools,
``context_search`` (full-text search over the archived turns of this conversation) and
``context_expand`` (read a span's messages verbatim, page by page), so nothing it once saw is out
of reach. No LLM is called, so a compaction never fails for a model's sake and costs
milliseconds.

It shares the cut (head, tail, pinned latest request/reply, tool groups), the repair pass and the
loop guards with the ``compressor`` engine; only what happens to the middle differs, which is the
point of the contract: an engine decides what the middle becomes.
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hermes_core import hookimpl
from hermes_core.compaction.assemble import assemble, without_summary
from hermes_core.compaction.errors import check_history
from hermes_core.compaction.fallback import extract_facts, render_facts
from hermes_core.compaction.policy import PolicyEngine
from hermes_core.compaction.repair import merge_adjacent_roles, repair_tool_pairs
from hermes_core.compaction.settings import CompactionSettings
from hermes_core.errors import ToolError
from hermes_core.kinds import PluginContext, Tool
from hermes_core.types import (
    CompressionResult,
    ForgetReport,
    Message,
    Session,
    SwitchReason,
    ToolContext,
)

from .records import Span
from .store import SpanStore, indexed_text, open_span_store

if TYPE_CHECKING:
    from .vectors import SpanVectors

__all__ = ["LosslessConfig", "LosslessEngine"]

_INDEX_INTRO = (
    "Older turns of this conversation are archived verbatim, not lost. The spans below list what "
    "each holds. To recover details, call context_search with words you remember (it searches "
    "every archived span of this conversation), then context_expand with a span id to read its "
    "messages exactly as they were."
)


class LosslessConfig(CompactionSettings):
    """The ``lossless:`` section of config.yaml."""

    section: ClassVar[str] = "lossless"

    #: the archive file, relative to $HERMES_CORE_HOME; default context.db
    db_path: str | None = Field(default=None, min_length=1)
    #: spans listed in the index message (all stay searchable)
    index_spans: int = Field(default=12, ge=1, le=200)
    #: the most characters one context_expand call returns
    expand_max_chars: int = Field(default=20_000, ge=1_000, le=200_000)
    #: the most hits one context_search call returns
    search_limit: int = Field(default=8, ge=1, le=50)
    #: context_search matches by meaning as well as words when an embedder is active (vectors of
    #: archived messages are computed in the background); false: words only
    semantic: bool = True


_SURROGATE = re.compile("[\ud800-\udfff]")


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=1_000, description="words to look for")
    limit: int | None = Field(default=None, ge=1, le=50, description="the most hits to return")

    @field_validator("query", mode="before")
    @classmethod
    def _no_lone_surrogates(cls, value: Any) -> Any:
        # a lone UTF-16 surrogate (valid in JSON, "\ud800") is not text: the length check
        # refused the whole query with "unable to parse raw data as a unicode string"
        return _SURROGATE.sub(" ", value) if isinstance(value, str) else value


class ExpandInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    span_id: int = Field(ge=1, description="a span id from the index or from context_search")
    start: int = Field(default=0, ge=0, description="the first message (seq) to return")
    count: int = Field(default=20, ge=1, le=200, description="how many messages to return")


def _day(ts: float | None) -> str:
    if not ts:
        return "?"
    return _dt.datetime.fromtimestamp(ts, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M")


class LosslessEngine(PolicyEngine):
    """Archives compacted turns and lets the model search and expand them."""

    name = "lossless"
    description = "Archives compacted turns verbatim; the model searches and expands them by tool"
    Config = LosslessConfig

    def __init__(
        self,
        config: LosslessConfig,
        context: PluginContext,
        *,
        window: int | None = None,
        store: SpanStore | None = None,
    ) -> None:
        super().__init__(config, context, window=window)
        self.settings = config
        path = context.home / "context.db" if config.db_path is None else context.home / config.db_path
        self.store = store if store is not None else open_span_store(context, path)
        self._vectors: SpanVectors | None = None
        self._vectors_lock = threading.Lock()
        #: the conversation served when no session was given (one per engine instance)
        self.conversation = f"instance-{id(self):x}"
        from hermes_core.storage import resolve_storage_url
        from hermes_core.storage.erasure_log import ErasureLog

        storage = getattr(getattr(context, "config", None), "storage", None)
        #: forgets noted while a conversation's turns are in flight (see :meth:`_forget_late`)
        self._erasures = ErasureLog(context.home, resolve_storage_url(getattr(storage, "url",
                                                                               None)))
        #: session id -> the erasure log's settled mark when its history was loaded
        self._marks: dict[str, int] = {}

    # ------------------------------------------------------------------------------ sessions

    def conversation_of(self, session: Session | None) -> str:
        """The conversation (lineage root) of ``session``; the engine's own one without it."""
        if session is None:
            return self.conversation
        root = self.store.root_of(session.id)
        if root is None and session.parent_session_id:
            root = self.store.root_of(session.parent_session_id)
        return root or session.id

    def bind_session(self, session: Session) -> None:
        """Serve ``session`` from now on (the kernel calls this, or ``on_session_switch`` does)."""
        root = self.conversation_of(session)
        self.store.link(session.id, root)
        self.conversation = root
        self._mark(session.id, None)

    def _mark(self, session_id: str, inherit: str | None) -> None:
        """Note the erasure log's settled mark for ``session_id`` (its history is loaded now),
        or the mark of the session it continues (``inherit``: a compaction's child)."""
        mark = self._marks.get(inherit) if inherit is not None else None
        if mark is None:
            try:
                mark = self._erasures.settled()
            except Exception as exc:
                self.log.error("lossless: cannot read the erasure log (%s): a forget landing "
                               "during this conversation's turns may be archived again", exc)
                return
        self._marks[session_id] = mark

    def _forget_late(self, session: Session | None, archived: list[Message],
                     digest: str) -> None:
        """A forget noted after ``session``'s history was loaded may not have reached what the
        turns in flight still held: what was just archived from them is forgotten again."""
        mark = self._marks.get(session.id) if session is not None else None
        if mark is None:
            return
        notes = [n for n in self._erasures.since(mark) if n.what == "forget" and n.scope == "all"]
        if not notes:
            return
        texts = [digest, *(indexed_text(m) for m in archived), *(m.content for m in archived)]
        texts += [str(v) for m in archived for c in m.tool_calls or () for v in c.arguments.values()]
        for note in notes:
            subject = note.find_in(*texts)
            if subject is not None:
                hits, _digests = self.store.forget(subject)
                if hits and self._vectors is not None:
                    self._vectors.prune()
                self.log.info("lossless: archived messages mentioned a subject forgotten while "
                              "their turn ran; forgotten again (%d message(s))", len(hits))

    @hookimpl
    def on_session_switch(
        self, new_session: Session, old_session: Session | None, reason: SwitchReason
    ) -> None:
        if reason == SwitchReason.COMPRESSION:
            # the child session continues the parent's conversation and sees its spans
            anchor = old_session if old_session is not None else new_session
            root = self.conversation_of(anchor)
            self.store.link(anchor.id, root)
            self.store.link(new_session.id, root)
            self.conversation = root
            self._mark(new_session.id, anchor.id)
            return
        self.reset()
        self.bind_session(new_session)

    @hookimpl
    def shutdown(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
        self.store.close()
        self._erasures.close()

    # ------------------------------------------------------------------------------ vectors

    def vectors(self) -> SpanVectors | None:
        """The archive's vectors (built on first use), or None when semantic search cannot take
        part at all: switched off, or a store that keeps no vectors."""
        if self._vectors is not None:
            return self._vectors
        storage_of = getattr(self.store, "vector_storage", None)
        if not self.settings.semantic or storage_of is None:
            return None
        with self._vectors_lock:
            if self._vectors is None:
                from .vectors import SpanVectors

                batch = self.context.config.embeddings.batch_size
                self._vectors = SpanVectors(storage_of(), self.context.embedder, batch=batch,
                                            core=self.context.config)
        return self._vectors

    def semantic_problem(self) -> str:
        """Why ``context_search`` matches by words only right now."""
        if not self.settings.semantic:
            return "semantic search is off (lossless.semantic: false)"
        vec = self.vectors()
        if vec is None:
            return "semantic search is not available with this archive store: words only"
        return vec.problem or "semantic search is off"

    @hookimpl
    def forget(self, subject: str, scope: str, dry_run: bool) -> ForgetReport:
        """Delete archived (compacted) messages that mention ``subject``."""
        if scope != "all":
            return ForgetReport(self.name, dry_run=dry_run, cannot_delete=(
                "the lossless archive is kept per conversation, not per user; forget with "
                "scope 'all'"))
        hits, digests = self.store.forget(subject, dry_run=dry_run)
        if hits and not dry_run and self._vectors is not None:
            self._vectors.prune()  # no vector of a forgotten message stays behind
        items = [f"message {seq} of span {span}" for span, seq in hits]
        items += [f"{digests} span digest(s)"] if digests else []
        matched = len(hits) + digests
        return ForgetReport(self.name, matched=matched, deleted=0 if dry_run else matched,
                            dry_run=dry_run, items=items)

    # ------------------------------------------------------------------------------ hooks

    @hookimpl
    def compress(
        self,
        messages: list[Message],
        focus_topic: str | None,
        memory_context: str,
        session: Session | None,
    ) -> CompressionResult:
        # The session the kernel hands over scopes the archive to its conversation. No default
        # on `session`: pluggy passes only arguments that have none.
        return self.with_report(self.compact(
            messages, focus_topic=focus_topic, memory_context=memory_context or "", session=session
        ))

    @hookimpl
    def describe_context(self, messages: list[Message], session: Session | None) -> dict[str, Any]:
        """What a compaction of ``messages`` would archive and keep (nothing is written)."""
        history = check_history(messages)
        plan = self.plan(history)
        total = sum(plan.tokens) + self.policy.overhead_tokens
        s = self.settings
        conversation = None if session is None else self.conversation_of(session)
        spans = self.store.count_spans(conversation) if conversation is not None else 0
        archived = len(plan.middle) if plan.reason is None else 0
        archived_tokens = plan.tokens_of(plan.middle) if archived else 0
        kept = plan.tokens_of(plan.kept) if archived else sum(plan.tokens)
        over = total >= self.threshold_tokens
        lines = [
            f"engine {self.name}: {len(history)} messages, about {total} tokens "
            f"({round(100.0 * total / self.window, 1)}% of a {self.window}-token window)",
            f"threshold {s.threshold} = {self.threshold_tokens} tokens: "
            f"{'over' if over else 'under'} it",
        ]
        if conversation is not None:
            lines.append(f"{spans} span(s) of this conversation are archived already")
        if plan.reason is not None:
            lines.append(f"a compaction would change nothing: {plan.reason}")
        else:
            lines.append(
                f"a compaction would archive messages {plan.head_end}-{plan.tail_start - 1} "
                f"({archived} messages, {archived_tokens} tokens) verbatim as a new span, "
                f"searchable with context_search; {len(plan.kept)} messages ({kept} tokens) "
                "stay in the live context, with an index of the spans")
        return {
            "engine": self.name,
            "messages": len(history),
            "tokens": total,
            "context_window": self.window,
            "threshold": s.threshold,
            "threshold_tokens": self.threshold_tokens,
            "over_threshold": over,
            "archive": {
                "spans_archived": spans,
                "would_archive_messages": archived,
                "would_archive_tokens": archived_tokens,
                "first": plan.head_end if archived else None,
                "last": plan.tail_start - 1 if archived else None,
                "kept_messages": len(plan.kept) if archived else len(history),
                "kept_tokens": kept,
                "nothing_to_compact": plan.reason,
            },
            "lines": lines,
        }

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [
            Tool(
                name="context_search",
                description=(
                    "Search the archived (compacted) turns of this conversation by words (and by "
                    "meaning when semantic search is on). Returns span ids and message positions "
                    "with a snippet and which path found each; read them with context_expand."
                ),
                handler=self._search_tool,
                input_model=SearchInput,
                parallel_safe=True,
            ),
            Tool(
                name="context_expand",
                description=(
                    "Read archived messages of one span verbatim, page by page: give the span id "
                    "(from the index message or context_search) and optionally start and count."
                ),
                handler=self._expand_tool,
                input_model=ExpandInput,
                parallel_safe=True,
            ),
        ]

    # ---------------------------------------------------------------------------- compaction

    def compact(
        self,
        messages: list[Message],
        *,
        focus_topic: str | None = None,
        memory_context: str = "",
        session: Session | None = None,
    ) -> CompressionResult:
        """Archive the middle of ``messages`` and put an index in its place."""
        history = check_history(messages)
        self.policy.record_attempt()
        conversation = self.conversation_of(session) if session is not None else self.conversation
        nothing = self._nothing_to_compact(history)
        if nothing is not None:
            return self._finish(history, history, "none", [nothing], summary=None, record=False)
        plan = self.plan(history)
        if plan.reason is not None:
            # Nothing to archive, but the history handed in may still be broken (a crash
            # mid-turn): return it repaired, as the contract asks of every compress.
            repaired, report = repair_tool_pairs(history)
            repaired, report.turns_merged = merge_adjacent_roles(repaired)
            notices = [f"nothing old enough to archive: {plan.reason}", *report.notices()]
            return self._finish(history, repaired, "none", notices, summary=None, record=False)
        archived = [kept for i in plan.middle if (kept := without_summary(history[i])) is not None]
        digest = render_facts(extract_facts(archived))
        try:
            span = self.store.add_span(conversation, archived, digest)
        except Exception as exc:  # never drop turns that could not be archived
            self.log.error("lossless: archiving %d messages failed: %s", len(archived), exc)
            notice = (f"archiving the compacted turns failed ({type(exc).__name__}: {exc}); the "
                      "history was left unchanged")
            return self._finish(history, history, "aborted", [notice], summary=None, record=False)
        try:
            self._forget_late(session, archived, digest)
        except Exception as exc:  # the archive keeps them: say so, never fail the compaction
            self.log.error("lossless: re-applying forgets to the archived turns failed: %s", exc)
        vec = self.vectors()
        if vec is not None:
            vec.wake()  # the span's vectors are computed on the indexer's thread, not here
        index = self._index(conversation)
        meta = {"source": "archived", "span_id": span.id, "compacted_messages": len(archived)}
        out = assemble(plan, history, index, summary_meta=meta)
        out, report = repair_tool_pairs(out)
        out, report.turns_merged = merge_adjacent_roles(out)
        notices = [
            f"archived {len(archived)} message(s) as span {span.id}; they stay searchable with "
            "context_search and readable with context_expand",
            *report.notices(),
        ]
        return self._finish(history, out, "archived", notices, summary=index, record=True,
                            always_warn=True, summarised=len(history) - len(out))

    def _index(self, conversation: str) -> str:
        spans = self.store.spans(conversation, limit=self.settings.index_spans)
        total = self.store.count_spans(conversation)
        lines = [_INDEX_INTRO, ""]
        if total > len(spans):
            lines.append(f"({total - len(spans)} older span(s) are not listed; search covers them.)")
        for span in spans:
            lines.append(self._describe(span))
        return "\n".join(lines)

    def _describe(self, span: Span) -> str:
        digest = span.digest.replace("\n", "\n  ")
        return (
            f"- span {span.id}: {span.n_messages} message(s), {_day(span.first_ts)} to "
            f"{_day(span.last_ts)} UTC\n  {digest}"
        )

    # --------------------------------------------------------------------------------- tools

    def _search_tool(self, args: SearchInput, context: ToolContext) -> dict[str, Any]:
        conversation = self.conversation_of(context.session)
        limit = args.limit or self.settings.search_limit
        vec = self.vectors()
        hybrid = vec.search(conversation, args.query, limit=limit) if vec is not None else None
        note: str | None = None
        if hybrid is not None:
            found, note = hybrid
            items = [self._hit(h.hit, h.via) for h in found]
            semantic = "on"
        else:
            items = [self._hit(h, "words")
                     for h in self.store.search(conversation, args.query, limit=limit)]
            semantic = self.semantic_problem()
        out: dict[str, Any] = {
            "query": args.query,
            "hits": items,
            "note": note if items else "no archived message matches; try other or fewer words",
            "semantic": semantic,
        }
        return out

    @staticmethod
    def _hit(h: Any, via: str) -> dict[str, Any]:
        return {"span_id": h.span_id, "seq": h.seq, "role": h.role, "when": _day(h.timestamp),
                "snippet": h.snippet, "found_by": via}

    def _expand_tool(self, args: ExpandInput, context: ToolContext) -> dict[str, Any]:
        conversation = self.conversation_of(context.session)
        span = self.store.span(args.span_id)
        if span is None or span.conversation != conversation:
            raise ToolError(
                f"span {args.span_id} is not an archived span of this conversation; use an id "
                "from the index message or from context_search"
            )
        rows = self.store.messages(span.id, args.start, args.count)
        out: list[dict[str, Any]] = []
        used = 0
        for row in rows:
            m = row.message
            item: dict[str, Any] = {"seq": row.seq, "role": m.role, "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            if m.tool_name:
                item["tool_name"] = m.tool_name
            size = len(m.content) + 200
            if out and used + size > self.settings.expand_max_chars:
                break
            if size > self.settings.expand_max_chars:
                keep = self.settings.expand_max_chars - 200
                item["content"] = m.content[:keep] + f"\n[... {len(m.content) - keep} more characters ...]"
            out.append(item)
            used += size
        last = out[-1]["seq"] if out else args.start - 1
        more = last + 1 < span.n_messages
        return {
            "span_id": span.id,
            "messages": out,
            "total_messages": span.n_messages,
            "next_start": last + 1 if more else None,
        }
