"""Copying the lossless archive between backends (``hermes-core storage migrate``).

Works on either store (:class:`~.store.SpanStore`, :class:`~.pg_store.PgSpanStore`) through their
public reads and :meth:`~.store.Spans.insert_spans`. What is copied:

* every session -> conversation link the target lacks;
* every conversation that has no span in the target yet, whole, in one transaction (an
  interrupted run leaves no conversation half copied), its messages verbatim. A span keeps
  its id when the target has it free (the index messages already in the conversation's
  history name spans by id), else it gets a new one and is counted as renumbered.

A conversation already holding spans in the target is left alone, so an interrupted migration
can be run again. The message vectors of semantic ``context_search`` are copied with their
conversation, nothing embedded again: message ids change on the way, so each vector goes to the
message at the same position of the same span (its text verbatim, so its text hash still holds),
with the model that made it. A target whose engine uses another model ignores them and embeds
its own, as after any switch of model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hermes_core.config import validate_section
from hermes_core.storage.transfer import CopyReport, StorageSide
from hermes_core.types import Message

from .records import Span, calls_json

__all__ = ["LosslessCopy", "copy_archive", "copy_lossless", "dump"]

#: messages read per span page when copying (a span is small; this bounds a huge one)
_PAGE = 10_000


@dataclass
class LosslessCopy:
    conversations: int = 0
    spans: int = 0
    messages: int = 0
    renumbered: int = 0
    #: conversations left alone because the target already holds spans of them
    kept: int = 0
    #: message vectors in the source
    vectors: int = 0
    #: of those, copied with their messages (the rest: of conversations already in the target)
    vectors_copied: int = 0


def _messages(store: Any, span_id: int) -> list[Message]:
    out: list[Message] = []
    start = 0
    while True:
        page = store.messages(span_id, start, _PAGE)
        out += [m.message for m in page]
        if len(page) < _PAGE:
            return out
        start = page[-1].seq + 1


def dump(store: Any) -> dict[str, Any]:
    """Everything the store holds, in a comparable form (links, spans, messages)."""
    return {
        "links": store.conversation_links(),
        "spans": {conv: [(s, _messages(store, s.id)) for s in store.spans(conv)]
                  for conv in store.conversations()},
    }


def copy_lossless(source: Any, target: Any) -> LosslessCopy:
    """Copy ``source``'s links and spans into ``target`` (see the module docstring); each
    conversation is copied whole in one transaction, so an interrupted run leaves none half
    copied."""
    out = LosslessCopy()
    count_vectors = getattr(source, "count_vectors", None)
    out.vectors = int(count_vectors()) if count_vectors is not None else 0
    known = dict(target.conversation_links())
    for session_id, root in source.conversation_links():
        if session_id not in known:
            target.link(session_id, root)
    for conversation in source.conversations():
        if target.count_spans(conversation):
            out.kept += 1
            continue
        items = [(span, _messages(source, span.id)) for span in source.spans(conversation)]
        ids = target.insert_spans(items)
        out.renumbered += sum(1 for (span, _m), new in zip(items, ids, strict=True)
                              if span.id != new)
        out.conversations += 1
        out.spans += len(items)
        out.messages += sum(len(m) for _, m in items)
        if out.vectors:
            new_id = {span.id: new for (span, _m), new in zip(items, ids, strict=True)}
            out.vectors_copied += _copy_vectors(source, target, conversation, new_id)
    return out


def _copy_vectors(source: Any, target: Any, conversation: str, new_id: dict[int, int]) -> int:
    """The conversation's message vectors, from ``source`` to the same positions of its spans
    (now ``new_id[span]``) in ``target``; how many."""
    from_vectors, into_vectors = source.vector_storage(), target.vector_storage()
    try:
        by_model: dict[str, list[tuple[int, int, str, bytes]]] = {}
        for span, seq, model, key, vec in from_vectors.conversation_rows(conversation):
            if span in new_id:
                by_model.setdefault(model, []).append((new_id[span], seq, key, vec))
        for model, rows in by_model.items():
            into_vectors.put_at(model, rows)
        return sum(len(rows) for rows in by_model.values())
    finally:
        from_vectors.close()
        into_vectors.close()


def copy_archive(source: StorageSide, target: StorageSide) -> CopyReport:
    """The ``copy_storage`` hook's work: ``source``'s lossless archive into ``target``'s."""
    from .engine import LosslessConfig
    from .store import span_store_at

    settings = validate_section(source.config, "lossless", LosslessConfig, plugin="lossless")

    def open_store(side: StorageSide) -> Any:
        return span_store_at(side.url, side.home / (settings.db_path or "context.db"))

    out = LosslessCopy()
    source_path = source.home / (settings.db_path or "context.db")
    if source.is_database or source_path.exists():
        from_store = open_store(source)
        try:
            # an empty database leaves no empty context.db behind
            if not source.is_database or from_store.conversations() or (
                    from_store.conversation_links()):
                into_store = open_store(target)
                try:
                    out = copy_lossless(from_store, into_store)
                finally:
                    into_store.close()
        finally:
            from_store.close()
    line = (f"lossless archive: {out.spans} span(s) of {out.conversations} conversation(s) "
            "copied" + (f", {out.renumbered} with a new id" if out.renumbered else "")
            + (f"; {out.kept} already there" if out.kept else ""))
    lines = [line]
    if out.vectors_copied:
        lines.append(f"lossless archive: {out.vectors_copied} message vector(s) copied with "
                     "their messages (nothing is embedded again)")
    return CopyReport(
        copied={"lossless_conversations": out.conversations, "lossless_spans": out.spans,
                "lossless_messages": out.messages, "lossless_vectors": out.vectors_copied},
        skipped={"lossless_conversations": out.kept}, lines=lines,
        detail={"renumbered": out.renumbered, "vectors_copied": out.vectors_copied})


def as_json(data: dict[str, Any]) -> str:
    """:func:`dump` as JSON text (for comparing two stores in tests and reports)."""

    def encode(value: Any) -> Any:
        if isinstance(value, Span):
            return [value.id, value.conversation, value.created_at, value.first_ts,
                    value.last_ts, value.n_messages, value.digest]
        if isinstance(value, Message):
            return [value.role, value.content, calls_json(value), value.tool_call_id,
                    value.tool_name, value.timestamp]
        raise TypeError(type(value).__name__)

    return json.dumps(data, default=encode, sort_keys=True, ensure_ascii=False)
