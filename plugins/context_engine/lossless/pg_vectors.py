"""Where :class:`~.vectors.SpanVectors` keeps vectors with the ``storage.url`` archive: the
``lossless_span_vectors`` table (migration 2 of the ``lossless`` component, pg_store.py), one
float32 ``bytea`` per message with its model id and text hash, deleted with its message
(``ON DELETE CASCADE``).

Several nodes may run the indexer on one database: each writes with ``ON CONFLICT DO UPDATE``,
so a vector computed twice is simply written twice (the same model gives the same vector), and a
message forgotten between reading and writing is skipped, never an error. A search reads the
conversation's vectors with one query; the cosine is computed in the process (numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_core.storage.text import decode_text

from .records import SearchHit, snippet

__all__ = ["PgVectorStorage"]


class PgVectorStorage:
    """Vectors in the same database as :class:`~.pg_store.PgSpanStore` (its connection pool)."""

    def __init__(self, *, run: Callable[..., Any], fetch: Callable[..., list[Any]], path: str
                 ) -> None:
        self._run = run  # the store's: a function of a pooled connection, retried when asked
        self._fetch_rows = fetch
        self.path = path

    def close(self) -> None:
        """Nothing to close: the pool is the store's."""

    def _fetch(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        return self._fetch_rows(sql, params)

    def unembedded(self, model: str, limit: int) -> list[tuple[int, str, str | None]]:
        rows = self._fetch(
            "SELECT m.id, m.content, m.tool_calls FROM lossless_span_messages m "
            "LEFT JOIN lossless_span_vectors v ON v.message_id = m.id "
            "WHERE v.message_id IS NULL OR v.model <> %s ORDER BY m.id LIMIT %s", (model, limit))
        return [(int(i), decode_text(c), decode_text(t) if t is not None else None)
                for i, c, t in rows]

    def put(self, model: str, rows: list[tuple[int, str, bytes]]) -> None:
        if not rows:
            return
        ids = [r[0] for r in rows]
        keys = [r[1] for r in rows]
        vecs = [r[2] for r in rows]
        # the join keeps only messages still archived; a concurrent node's write of the same
        # vector is overwritten with an equal one
        self._run(lambda con: con.execute(
            "INSERT INTO lossless_span_vectors(message_id, model, text_hash, vec) "
            "SELECT u.id, %s, u.key, u.vec FROM unnest(%s::bigint[], %s::text[], %s::bytea[]) "
            "AS u(id, key, vec) JOIN lossless_span_messages m ON m.id = u.id "
            "ON CONFLICT (message_id) DO UPDATE SET model = excluded.model, "
            "text_hash = excluded.text_hash, vec = excluded.vec",
            (model, ids, keys, vecs)), retry=True)

    def prune(self) -> int:
        """Vectors go with their message (ON DELETE CASCADE); this removes none in practice."""
        return int(self._run(lambda con: con.execute(
            "DELETE FROM lossless_span_vectors v WHERE NOT EXISTS (SELECT 1 FROM "
            "lossless_span_messages m WHERE m.id = v.message_id)").rowcount or 0, retry=True))

    def pending(self, model: str) -> int:
        (row,) = self._fetch(
            "SELECT count(*) FROM lossless_span_messages m LEFT JOIN lossless_span_vectors v "
            "ON v.message_id = m.id WHERE v.message_id IS NULL OR v.model <> %s", (model,))
        return int(row[0])

    def vectors(self, conversation: str, model: str) -> tuple[list[tuple[int, bytes]], int]:
        def run(con: Any) -> list[Any]:
            # binary results: the vectors arrive as bytes, not as hex text to decode
            with con.cursor(binary=True) as cur:
                return cur.execute(  # type: ignore[no-any-return]
                    "SELECT m.id, v.vec FROM lossless_span_messages m "
                    "JOIN lossless_spans s ON s.id = m.span_id "
                    "LEFT JOIN lossless_span_vectors v ON v.message_id = m.id AND v.model = %s "
                    "WHERE s.conversation = %s", (model, conversation)).fetchall()

        rows = self._run(run, retry=True)
        missing = sum(1 for _i, b in rows if b is None)
        return [(int(i), bytes(b)) for i, b in rows if b], missing

    def lexical(self, conversation: str, terms: list[str], limit: int
                ) -> tuple[dict[int, float], str]:
        """The word match of :meth:`.pg_store.PgSpanStore.search` (every word, else any word),
        as message id -> ``ts_rank_cd`` (higher is better)."""
        if not terms:
            return {}, "none"
        for joiner, how in ((" && ", "all"), (" || ", "any")):
            tsquery = joiner.join(["plainto_tsquery('simple', %s)"] * len(terms))
            rows = self._fetch(
                "SELECT m.id, ts_rank_cd(m.words, q.query) FROM lossless_span_messages m "
                f"JOIN lossless_spans s ON s.id = m.span_id, (SELECT {tsquery} AS query) AS q "
                "WHERE m.words @@ q.query AND s.conversation = %s "
                "ORDER BY ts_rank_cd(m.words, q.query) DESC, m.id LIMIT %s",
                (*terms, conversation, limit))
            if rows:
                return {int(i): float(rank) for i, rank in rows}, how
            if len(terms) == 1:
                break
        return {}, "none"

    def hits(self, ids: list[int], terms: list[str]) -> dict[int, SearchHit]:
        if not ids:
            return {}
        rows = self._fetch(
            "SELECT id, span_id, seq, role, content, tool_calls, timestamp FROM "
            "lossless_span_messages WHERE id = ANY(%s)", (ids,))
        out = {}
        for mid, span, seq, role, content, calls, ts in rows:
            text = decode_text(content) + " " + (decode_text(calls) if calls else "")
            out[int(mid)] = SearchHit(int(span), int(seq), role, snippet(text, terms), ts)
        return out
