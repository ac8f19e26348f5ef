"""How much of a question's wording a message holds, weighted by how rare each word is.

The hybrid fusion (hybrid.py) adds :attr:`~.hybrid.Policy.share` times this share to a
message's meaning score when it reaches :attr:`~.hybrid.Policy.share_floor`. A message that
holds most of a question's rare words ("the dentist in Leeds": *dentist*, *leeds*) is evidence
even when its vector is not the closest; one that holds a single common word of the question is
not, and stays below the floor.

For a question's content terms T (its words as the word index stores them: stemmed, without the
archive's query :data:`~.query.STOPWORDS`), message i's share is

    sum(idf(t) for t in T if message i holds t) / sum(idf(t) for t in T)

with BM25's idf, ``ln((N - df + 0.5) / (df + 0.5) + 1)``: N the archive's messages, df the
number of messages whose indexed text holds t. A term no message holds counts in the
denominator (the question asks about something the archive does not name).

Both are read from the archive's own word index at query time, with no stored state. On SQLite
one pass over the rowids of an FTS5 match of each term (their number is df; the candidates
among them hold the term) each query, and the number of messages counted once and kept
exact from then on (:func:`_sqlite_size`). On PostgreSQL ``count(*)`` of a
``tsvector @@`` match (the GIN index) per term, and of the messages, kept per archive until 1%
more messages are stored (:class:`_PgFrequencies`), and which candidates hold each term in one
primary-key lookup. The terms are the SQLite tokenizer's (Porter stems); on PostgreSQL each
is matched by the word it came from, stemmed by the ``english`` configuration as the index is,
and a word that configuration drops as a stopword is left out.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

from .query import _TOKENIZER, STOPWORDS, quote
from .store import SessionArchive

__all__ = ["question_terms", "word_shares"]

_SQLITE_HOLDERS = ("SELECT count(*), group_concat(CASE WHEN +rowid IN ({marks}) THEN rowid END) "
                   "FROM messages_fts WHERE messages_fts MATCH ?")
#: terms whose document frequency is kept per PostgreSQL archive
DF_CACHE = 4096
#: the kept counts are renewed once the messages stored since pass this share of the archive
#: (a share that small moves an IDF by at most ln(1.01), 0.01)
RECOUNT = 0.01


def question_terms(query: str) -> dict[str, str]:
    """The question's content terms as the word index stores them (Porter stems, in order),
    each with the word it came from (what a match of the term is written with)."""
    terms: dict[str, str] = {}
    for word in re.findall(r"\w+", query.casefold()):
        if word in STOPWORDS:
            continue
        for piece in re.findall(r"[^\W_]+", word):
            for stem in _TOKENIZER.stems(piece):
                terms.setdefault(stem, piece)
    return terms


def _sqlite_counts(archive: SessionArchive, words: list[str], ids: list[int],
                   ) -> tuple[int, dict[str, tuple[int, set[int]]]]:
    """The number of messages; per word, how many messages' indexed text holds it and which
    of ``ids`` do (one statement per word and 900 ids)."""
    out: dict[str, tuple[int, set[int]]] = {}
    for word in words:
        # one pass over the term's rowids, each tested against the candidates: "+rowid" keeps
        # FTS5 from seeking once per candidate instead, and the rows stay in SQLite (at 1M
        # messages, a word in 46,592 of them: 14 ms, against 46 ms for reading every rowid and
        # 16 ms for the seeks)
        rows = archive.read_in(_SQLITE_HOLDERS, ids, (quote(word),))
        out[word] = (rows[-1][0] if rows else 0,
                     {int(i) for _df, found in rows for i in (found or "").split(",") if i})
    return _sqlite_size(archive), out


#: a count of the messages this connection stores and deletes, kept by TEMP triggers: they live
#: in the connection's temporary schema (nothing is stored in the archive file), and a rolled
#: back write rolls the count back too
_COUNTER = (
    "CREATE TEMP TABLE IF NOT EXISTS word_share_stored (n INTEGER NOT NULL)",
    "INSERT INTO temp.word_share_stored SELECT 0 WHERE NOT EXISTS "
    "(SELECT 1 FROM temp.word_share_stored)",
    "CREATE TEMP TRIGGER IF NOT EXISTS word_share_added AFTER INSERT ON main.messages "
    "BEGIN UPDATE word_share_stored SET n = n + 1; END",
    "CREATE TEMP TRIGGER IF NOT EXISTS word_share_removed AFTER DELETE ON main.messages "
    "BEGIN UPDATE word_share_stored SET n = n - 1; END",
)
#: (that count; commits by other connections; schema changes, this connection's included)
_STATE = ("SELECT (SELECT n FROM temp.word_share_stored), (SELECT data_version FROM "
          "pragma_data_version), (SELECT schema_version FROM pragma_schema_version)")


@dataclass
class _Size:
    """The number of messages of one SQLite archive when it was last counted, with what it
    is measured against since: the connection, and its :data:`_STATE` then."""

    con: object
    others: tuple[int, int]
    stored: int
    size: int


_SQLITE_SIZES: weakref.WeakKeyDictionary[SessionArchive, _Size] = weakref.WeakKeyDictionary()


def _install(archive: SessionArchive) -> None:
    for sql in _COUNTER:
        archive.db.read(sql)


def _sqlite_size(archive: SessionArchive) -> int:
    """The number of messages, exact, without reading every message's entry per query
    (``count(*)`` reads the smallest index whole: 7-15 ms at 1M messages). Counted once; then
    what this connection stores and deletes is added (:data:`_COUNTER`), and it is counted
    again only when another connection has committed (``data_version``) or the schema changed
    (a rebuilt table would drop the triggers)."""
    with archive.db.lock:  # the connection's reads and writes are serialised on it
        con = archive.db.con
        kept = _SQLITE_SIZES.get(archive)
        try:
            if kept is None or kept.con is not con:
                _install(archive)
            stored, *others = archive.db.read(_STATE)[0]
            if kept is not None and kept.con is con and kept.others == tuple(others):
                return kept.size + int(stored) - kept.stored
            if kept is not None and kept.con is con:  # a schema change may have dropped them
                _install(archive)
                stored, *others = archive.db.read(_STATE)[0]
        except Exception:  # a connection that cannot keep them: counted for each query
            _SQLITE_SIZES.pop(archive, None)
            return archive.count_messages()
        size = archive.count_messages()
        _SQLITE_SIZES[archive] = _Size(con, (int(others[0]), int(others[1])), int(stored), size)
        return size


class _PgFrequencies:
    """The number of messages and the document frequency of the last :data:`DF_CACHE` words
    asked, of one PostgreSQL archive: counting reads every matching row of the table (bitmap
    heap scan; the whole table for the number of messages, 7 ms at 100k messages), 5-20 ms for
    a common word at 100k, growing with the archive. They are kept until more messages than
    :data:`RECOUNT` of the archive have been stored since (by the newest message id), or the
    newest message counted is deleted; in an archive of fewer than 100 messages every message
    stored renews them. Another deletion counts from the next renewal."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.newest: int | None = None
        self.size = 0
        self.df: OrderedDict[str, int | None] = OrderedDict()

    def _stale(self, newest: int | None) -> bool:
        """Whether the counts must be renewed, the archive's newest message id now ``newest``."""
        if newest is None or self.newest is None:
            return True
        return not 0 <= newest - self.newest <= self.size * RECOUNT

    def counts(self, archive: SessionArchive, words: list[str]) -> tuple[int, dict[str, int | None]]:
        """The number of messages and each word's document frequency (None: the ``english``
        configuration drops it)."""
        from .search import tsquery_text

        newest = archive.db.read("SELECT max(id) FROM messages")[0][0]
        with self.lock:
            if self._stale(newest):
                self.newest, self.df = newest, OrderedDict()
                self.size = archive.count_messages()
            missing = [w for w in words if w not in self.df]
            if missing:
                parts = ["numnode(to_tsquery('english', ?)), (SELECT count(*) FROM messages "
                         "WHERE tsv @@ to_tsquery('english', ?))" for _ in missing]
                params = [tsquery_text(quote(w)) for w in missing for _ in (0, 1)]
                row = archive.db.read("SELECT " + ", ".join(parts), tuple(params))[0]
                for k, word in enumerate(missing):
                    self.df[word] = int(row[2 * k + 1]) if row[2 * k] else None
            for word in words:
                self.df.move_to_end(word)
            while len(self.df) > DF_CACHE:
                self.df.popitem(last=False)
            return self.size, {w: self.df[w] for w in words}


_PG_CACHES: weakref.WeakKeyDictionary[SessionArchive, _PgFrequencies] = (
    weakref.WeakKeyDictionary())
_PG_CACHES_LOCK = threading.Lock()


def _pg_counts(archive: SessionArchive, words: list[str], ids: list[int],
               ) -> tuple[int, dict[str, tuple[int, set[int]]]]:
    """:func:`_sqlite_counts` on PostgreSQL: the counts from the archive's cache, which of
    ``ids`` hold each word in one statement (a primary-key lookup of the candidates)."""
    from .search import tsquery_text

    with _PG_CACHES_LOCK:
        cache = _PG_CACHES.setdefault(archive, _PgFrequencies())
    size, df = cache.counts(archive, words)
    words = [w for w in words if df[w] is not None]
    if not words:
        return size, {}
    where, ids_param = archive.db.any_of("id", ids)
    tests = ", ".join("coalesce(ts_match_vq(tsv, to_tsquery('english', ?)), false)"
                      for _ in words)
    rows = archive.db.read(f"SELECT id, {tests} FROM messages WHERE {where}",
                           (*[tsquery_text(quote(w)) for w in words], *ids_param))
    return size, {w: (df[w] or 0, {int(r[0]) for r in rows if r[k + 1]})
                  for k, w in enumerate(words)}


def word_shares(archive: SessionArchive, query: str, ids: list[int]) -> dict[int, float]:
    """Each of ``ids`` that holds some of ``query``'s content terms, with its IDF-weighted share
    of them (0 < share <= 1); ids holding none are left out."""
    terms = question_terms(query)
    if not terms or not ids:
        return {}
    words = list(dict.fromkeys(terms.values()))
    counts = _pg_counts if archive.backend == "postgresql" else _sqlite_counts
    size, found = counts(archive, words, ids)
    held: dict[int, float] = {}
    total = 0.0
    for df, holders in found.values():
        idf = math.log((size - df + 0.5) / (df + 0.5) + 1.0)
        total += idf
        for i in holders:
            held[i] = held.get(i, 0.0) + idf
    return {i: v / total for i, v in held.items()} if total > 0 else {}
