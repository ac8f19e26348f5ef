"""The best matches of a one-word query without scoring every match (SQLite, schema version 6).

A common word matches tens of thousands of messages in a large archive, and FTS5's ``bm25``
scores each of them (about a microsecond each: see docs/session-archive.md). For the words in
at least 1 % of the messages (and at least :data:`MIN_DF`), :func:`rebuild` keeps each word's
best :data:`KEEP` messages in ``term_impacts``, in the order of their BM25 term weight ``g``
under the archive's average length at that time (``key``), with what recomputes FTS5's score
exactly (the word's count per column, ``tf``; the message's length in tokens, ``dl``); and in
``term_bounds`` the best ``key`` of the messages not kept (``bound``). The words just under
that (in at least 0.4 % of the messages and :data:`MIN_DF_LOW`) keep their best
:data:`KEEP_LOW`: enough for the 610 candidates a hybrid query ranks, for a fraction of the
size (FTS5 scores their 4,000-10,000 matches in 6-16 ms at 1M messages).

:func:`top_k` answers a query that is one such word (``"word"``) with the same candidates,
scores and order as FTS5's ranking of every match:

* messages up to ``meta.impacts_upto`` (the newest id when it was built) are read from the
  kept rows, best key first, with the search's own scope conditions, and scored as FTS5's
  ``bm25`` scores them (same formula, same operations in the same order, so bit for bit the
  same double: N, the total length and the word's match count are read from the index then);
  reading stops once no unread row can reach the k-th best. The average length moves as
  messages come and go: a row's true ``g`` is within ``[key·min(1, r), key·max(1, r)]`` with
  ``r`` = today's average / the average it was keyed with, so the stop uses that bound;
* newer messages are ranked by FTS5 itself (``rowid > impacts_upto``);
* the two are merged. When the kept rows cannot prove the k-th best (a scope that leaves few
  of them, or a bound too close), it returns None and the caller ranks every match with FTS5.

Kept in step by triggers (schema.py): deleting a message deletes its rows (forget, erase);
storing a message with an id at or below ``impacts_upto`` (an id reused after the newest
messages were deleted), or changing an indexed message, lowers ``impacts_upto`` below it, so
those messages are ranked by FTS5 until the next :func:`rebuild`; deletions and changes are
counted (``meta.message_changes``) so that a build notices them. ``storage migrate`` builds it
for the archive it writes, ``sessions reindex --words`` in place. An archive that was never
built (``impacts_upto`` absent) ranks every match with FTS5, as before.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .db import _connect_ro
from .query import _TOKENIZER

if TYPE_CHECKING:
    from .store import SessionArchive

__all__ = ["KEEP", "KEEP_LOW", "MIN_DF", "MIN_DF_LOW", "UPTO", "WEIGHTS", "forget_words",
           "rebuild", "top_k"]

#: BM25 constants of FTS5's bm25()
_K1, _B = 1.2, 0.75
#: the archive's BM25 column weights: content, tool name, tool-call argument values
WEIGHTS = (1.0, 0.5, 0.6)
_COLUMNS = ("content", "tool_name", "tool_args")
#: messages kept per common word
KEEP = 4096
#: a word is common when at least this many messages (and 1 % of them) hold it
MIN_DF = 10_000
#: messages kept per word just under that: in at least this many messages (and 0.4 % of them);
#: enough for the 610 best a hybrid query asks for (2 x 300 + 10), not for 2,000
KEEP_LOW = 1024
MIN_DF_LOW = 4_000
#: meta key: the newest message id the kept rows cover
UPTO = "impacts_upto"
#: relative margin of the stop test (float rounding between keys and scores)
_EPS = 1e-9
_ONE_WORD = re.compile(r'^"([^"\s]+)"$')


def _varints(blob: bytes) -> list[int]:
    """SQLite varints, as FTS5 stores its sizes."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        v = 0
        for j in range(9):
            c = blob[i]
            i += 1
            if j == 8:
                v = (v << 8) | c
                break
            v = (v << 7) | (c & 0x7F)
            if not c & 0x80:
                break
        out.append(v)
    return out


def _totals(con: sqlite3.Connection) -> tuple[int, int]:
    """(messages indexed, tokens over all columns): FTS5's own figures (its averages record)."""
    row = con.execute("SELECT block FROM messages_fts_data WHERE id = 1").fetchone()
    sizes = _varints(row[0]) if row else []  # a table never written to: an empty record
    return (sizes[0], sum(sizes[1:])) if sizes else (0, 0)


def _freq(tf: int) -> float:
    """The phrase frequency bm25() sums: each instance's column weight, in column order."""
    f = 0.0
    for col in range(3):
        for _ in range((tf >> (20 * col)) & 0xFFFFF):
            f += WEIGHTS[col]
    return f


def _weight(f: float, dl: int, avgdl: float) -> float:
    return (f * (_K1 + 1.0)) / (f + _K1 * (1 - _B + _B * float(dl) / avgdl))


def _idf(n_row: int, n_hit: int) -> float:
    idf = math.log((n_row - n_hit + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else 1e-6


class _Raced(Exception):
    """Messages were deleted or changed while the rows were being built."""


def rebuild(archive: SessionArchive, *, keep: int = KEEP, min_df: int | None = None,
            keep_low: int = KEEP_LOW, min_df_low: int | None = None, attempts: int = 3) -> int:
    """Build the kept rows afresh; the number of words kept: ``keep`` rows of those in
    ``min_df`` messages (default :data:`MIN_DF`) and in 1 % of them, ``keep_low`` rows of those
    under that but in ``min_df_low`` messages (default :data:`MIN_DF_LOW`) and in 0.4 % of them
    (``keep_low`` 0: none).

    Searches rank every match until it is done: the covered id is removed first and set last.
    The messages are read in one snapshot on a read connection of their own, and each word's
    rows are written in a short transaction of their own (a turn's append never waits for the
    whole build); each checks that no message was deleted or changed since the snapshot
    (``meta.message_changes``, counted by triggers), else the build starts again, up to
    ``attempts`` times, then gives up with nothing kept (0)."""
    for _ in range(attempts):
        archive.db.write(_clear)
        reader = _connect_ro(archive.db.path, archive.db.busy_timeout, immutable=False)
        try:
            reader.execute("BEGIN")
            return _build(archive, reader, keep, min_df, keep_low, min_df_low)
        except _Raced:
            continue
        finally:
            reader.close()
    archive.db.write(_clear)
    return 0


def _clear(con: sqlite3.Connection) -> None:
    con.execute("DELETE FROM meta WHERE key = ?", (UPTO,))
    con.execute("DELETE FROM term_impacts")
    con.execute("DELETE FROM term_bounds")


def forget_words(con: sqlite3.Connection, subject: str) -> int:
    """In ``forget``'s transaction: drop the kept words (and their rows) that hold a token of
    ``subject``, so the word's text leaves ``term_bounds``; those words are ranked by FTS5 until
    the next :func:`rebuild`. The number of words dropped."""
    if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'term_bounds'").fetchone():
        return 0
    stems = _TOKENIZER.stems(subject)
    nums = [r[0] for stem in stems for r in con.execute(
        "SELECT num FROM term_bounds WHERE instr(term, ?) > 0", (stem,))]
    for num in set(nums):
        con.execute("DELETE FROM term_impacts WHERE term = ?", (num,))
        con.execute("DELETE FROM term_bounds WHERE num = ?", (num,))
    return len(set(nums))


def _changes(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'message_changes'"
                      ).fetchone()
    return int(row[0]) if row else 0


def _build(archive: SessionArchive, reader: sqlite3.Connection, keep: int,
           min_df: int | None, keep_low: int, min_df_low: int | None) -> int:
    changes = _changes(reader)
    n_row, n_tok = _totals(reader)
    newest = reader.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    words: list[str] = []
    if n_row:
        avgdl = n_tok / n_row
        reader.execute("CREATE VIRTUAL TABLE temp.hc_vocab_rows "
                       "USING fts5vocab(main, messages_fts, row)")
        reader.execute("CREATE VIRTUAL TABLE temp.hc_vocab_hits "
                       "USING fts5vocab(main, messages_fts, instance)")
        high = max(MIN_DF if min_df is None else min_df, -(-n_row // 100))
        low = max(MIN_DF_LOW if min_df_low is None else min_df_low, -(-n_row // 250))
        chosen = [(r[0], keep if r[1] >= high else keep_low) for r in reader.execute(
            "SELECT term, doc FROM temp.hc_vocab_rows WHERE doc >= ?",
            (min(high, low) if keep_low > 0 else high,))]
        words = [w for w, _ in chosen]
        lengths = {rid: sum(_varints(sz)) for rid, sz in
                   reader.execute("SELECT id, sz FROM messages_fts_docsize")}
        for num, (word, kept) in enumerate(chosen, 1):
            rows, bound = _scored(_hits(reader, word), lengths, avgdl, kept)
            archive.db.write(functools.partial(_keep_word, changes=changes, num=num, word=word,
                                               rows=rows, bound=bound, avgdl=avgdl))

    def finish(con: sqlite3.Connection) -> None:
        if _changes(con) != changes:
            raise _Raced
        con.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                    "SET value = excluded.value", (UPTO, str(newest)))

    archive.db.write(finish)
    return len(words)


def _hits(con: sqlite3.Connection, word: str) -> dict[int, int]:
    """message id -> the word's count per column, packed 20 bits each (``tf``)."""
    out: dict[int, int] = {}
    for doc, col, n in con.execute(
            "SELECT doc, col, count(*) FROM temp.hc_vocab_hits WHERE term = ? "
            "GROUP BY doc, col", (word,)):
        out[doc] = out.get(doc, 0) | (min(n, 0xFFFFF) << (20 * _COLUMNS.index(col)))
    return out


def _scored(hits: dict[int, int], lengths: dict[int, int], avgdl: float, keep: int,
            ) -> tuple[list[tuple[float, int, int, int]], float]:
    """The best ``keep`` (key, id, tf, length) of a word, and the best key of the others."""
    scored = [(_weight(_freq(tf), lengths[doc], avgdl), doc, tf, lengths[doc])
              for doc, tf in hits.items()]
    bound = 0.0
    if len(scored) > keep:
        scored = heapq.nlargest(keep + 1, scored)
        bound = scored.pop()[0]
    return scored, bound


def _keep_word(con: sqlite3.Connection, *, changes: int, num: int, word: str,
               rows: list[tuple[float, int, int, int]], bound: float, avgdl: float) -> None:
    if _changes(con) != changes:
        raise _Raced
    con.executemany("INSERT INTO term_impacts(term, key, doc, tf, dl) VALUES (?, ?, ?, ?, ?)",
                    [(num, key, doc, tf, dl) for key, doc, tf, dl in rows])
    con.execute("INSERT INTO term_bounds(term, num, bound, avgdl) VALUES (?, ?, ?, ?)",
                (word, num, bound, avgdl))


def top_k(con: sqlite3.Connection, expr: str, score: str, prefix: str, where: Iterable[str],
          params: dict[str, Any], limit: int) -> list[tuple[int, float]] | None:
    """The best ``limit`` (id, ``score``: the search's bm25 call) of the one-word FTS5
    expression ``expr`` under the search's scope (``prefix``, ``where`` on ``d.rowid``,
    ``params``), ordered as FTS5 orders them (score, then newest first); None when the kept
    rows cannot answer it (the caller ranks every match). Run under the connection's lock."""
    m = _ONE_WORD.match(expr)
    if m is None or limit <= 0:
        return None
    stems = _TOKENIZER.stems(m.group(1))
    if len(stems) != 1:
        return None
    own = not con.in_transaction  # one read snapshot, as FTS5's single statement has
    if own:
        con.execute("BEGIN")
    try:
        return _top_k(con, expr, stems[0], score, prefix, where, params, limit)
    finally:
        if own and con.in_transaction:
            con.execute("COMMIT")


def _top_k(con: sqlite3.Connection, expr: str, stem: str, score: str, prefix: str,
           where: Iterable[str], params: dict[str, Any], limit: int,
           ) -> list[tuple[int, float]] | None:
    try:
        row = con.execute(
            "SELECT b.num, b.bound, b.avgdl, CAST(m.value AS INTEGER) FROM term_bounds AS b, "
            "meta AS m WHERE b.term = ? AND m.key = ?", (stem, UPTO)).fetchone()
    except sqlite3.OperationalError:  # an archive older than schema 6, opened read-only
        return None
    if row is None:
        return None
    num, bound, avgdl0, upto = row
    n_row, n_tok = _totals(con)
    if n_row == 0 or n_tok == 0:
        return None
    avgdl = n_tok / n_row
    n_hit = con.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                        (expr,)).fetchone()[0]
    scope = " AND ".join(["1", *where])
    args = dict(params, hc_num=num, hc_upto=upto, hc_expr=expr, hc_k=limit)
    idf = _idf(n_row, n_hit)
    kept = _best_kept(con.execute(
        f"{prefix} SELECT d.rowid, d.key, d.tf, d.dl FROM (SELECT doc AS rowid, key, tf, dl "
        f"FROM term_impacts WHERE term = :hc_num AND doc <= :hc_upto) AS d WHERE {scope} "
        "ORDER BY d.key DESC", args), limit, avgdl, idf, max(1.0, avgdl / avgdl0) * (1 + _EPS),
        bound)
    if kept is None:
        return None
    out = [(doc, -1.0 * (0.0 + w)) for w, doc in kept]  # bm25(): score += idf * g; -1 * score
    out += con.execute(
        f"{prefix} SELECT d.rowid, {score} AS s FROM messages_fts AS d WHERE messages_fts "
        f"MATCH :hc_expr AND d.rowid > :hc_upto AND {scope} ORDER BY s, d.rowid DESC "
        "LIMIT :hc_k", args).fetchall()
    out.sort(key=lambda r: (r[1], -r[0]))
    return [(int(doc), float(s)) for doc, s in out[:limit]]


def _best_kept(rows: Iterator[Any], limit: int, avgdl: float, idf: float, ratio: float,
               bound: float) -> list[tuple[float, int]] | None:
    """The best ``limit`` (idf·g, id) of the kept rows (best key first; a row's g is at most
    ``ratio`` times its key; ``bound``: the best key not kept), or None when a message not
    kept could still reach the last of them."""
    best: list[tuple[float, int]] = []  # min-heap: (idf·g, id), a tie going to the newer id
    for doc, key, tf, dl in rows:
        if len(best) >= limit and idf * key * ratio < best[0][0] * (1 - _EPS):
            return best  # no unread row can reach the k-th best
        item = (idf * _weight(_freq(tf), dl, avgdl), doc)
        if len(best) < limit:
            heapq.heappush(best, item)
        elif item > best[0]:
            heapq.heapreplace(best, item)
    if bound > 0.0 and (len(best) < limit
                        or idf * bound * ratio >= best[0][0] * (1 - _EPS)):
        return None
    return best
