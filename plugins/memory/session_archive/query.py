"""Turning what a person or a model types into a valid FTS5 query.

Every term is emitted as an FTS5 string (``"..."``, inner quotes doubled), so no character of the
input can break the syntax: ``?``, ``'``, ``,``, ``$``, ``%``, ``/``, ``:``, ``-`` and ``.`` only
separate words inside a string, where FTS5 reads them as a phrase (``chat-send`` and ``P2.2``
become the phrases they are). What remains is decided here, by construction:

* balanced ``"quoted phrases"`` are kept as phrases; a lone ``"`` is ignored;
* ``AND``, ``OR``, ``NOT`` (upper case) are honoured when they have operands on both sides, and
  then so are balanced parentheses; dangling operators and unmatched parentheses are dropped, and
  parentheses in a query without operators are plain punctuation;
* a word with no letter or digit (``?``, ``--``, ``…``) is dropped: as an FTS5 string it would
  be an empty phrase, which matches nothing and would empty a whole AND;
* a plain query (no operators) drops English stopwords unless it has nothing else, and is tried as
  a strict AND of its words first and as a ranked OR when the AND finds nothing;
* runs of CJK letters go to the CJK indexes (see cjk.py) instead of the word index.

A query that is too long or has nothing to search for raises :class:`QueryError` with what to do.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass, field

from .cjk import split_cjk
from .errors import QueryError
from .records import clean_text

__all__ = ["MAX_QUERY_CHARS", "MAX_TERMS", "SearchPlan", "build_query", "quote"]

MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
#: prefix queries (``term*``) need this many letters: ``a*`` would read most of the index
MIN_PREFIX = 3

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each few for from further had hadn't has hasn't have haven't having he he'd
he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
or other ought our ours ourselves out over own same shan't she she'd she'll she's should
shouldn't so some such than that that's the their theirs them themselves then there there's
these they they'd they'll they're they've this those through to too under until up very was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your
yours yourself yourselves also just tell remember recall anything something please thing things
s t
""".split())  # noqa: SIM905 - a word list reads better as text

_OPERATORS = {"AND", "OR", "NOT"}
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EDGE_PUNCT = "?!.,;:"
_POSSESSIVE = re.compile("^(.*\\w)['\u2019][sS]$")
_TRAILING = re.compile(r"[^\w*]+$")


def quote(text: str, prefix: bool = False) -> str:
    """``text`` as an FTS5 string (a phrase of its tokens), with ``*`` for a prefix query."""
    return '"' + text.replace('"', '""') + '"' + ("*" if prefix else "")


class _Tokenizer:
    """Asks SQLite's own unicode61 tokenizer whether a non-ASCII word yields any token.

    Python's and SQLite's ideas of "letter" differ for a few dozen characters (SQLite's tables
    are Unicode 6.1), and a word that yields no token would be an empty phrase.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one process-wide instance
    def has_token(self, word: str) -> bool:
        if _ASCII_ALNUM.search(word):
            return True
        if not any(unicodedata.category(ch)[0] in "LNM" or ord(ch) > 0xFFFF for ch in word):
            return False
        with self._lock:
            if self._con is None:
                self._con = sqlite3.connect(":memory:", check_same_thread=False)
                self._con.execute(
                    "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 "
                    "remove_diacritics 2')"
                )
                self._con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
            con = self._con
            con.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (word,))
            found = con.execute("SELECT count(*) FROM v").fetchone()[0] > 0
            con.execute("DELETE FROM t")
            return bool(found)


_TOKENIZER = _Tokenizer()


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "word", "phrase", "op", "(" or ")"
    text: str = ""
    prefix: bool = False


@dataclass
class SearchPlan:
    """What to run for one query."""

    text: str
    #: FTS5 expression over the word index for the first try (None: no word terms)
    strict: str | None = None
    #: the ranked-OR fallback when ``strict`` finds nothing (None: no fallback)
    fallback: str | None = None
    #: CJK runs: 1-2 characters go to the grams index, 3+ to the trigram index
    cjk: list[str] = field(default_factory=list)
    #: True when the user wrote AND/OR/NOT: honoured as written, no fallback
    advanced: bool = False
    #: lower-case words and phrases, for snippets and for placing windows
    needles: list[str] = field(default_factory=list)

    @property
    def cjk_short(self) -> list[str]:
        return [r for r in self.cjk if len(r) < 3]

    @property
    def cjk_long(self) -> list[str]:
        return [r for r in self.cjk if len(r) >= 3]


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            end = text.find('"', i + 1)
            if end == -1:  # an unmatched quote is just punctuation
                i += 1
                continue
            toks.append(_Tok("phrase", text[i + 1 : end]))
            i = end + 1
        elif ch in "()":
            toks.append(_Tok(ch))
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '"()':
                j += 1
            word = text[i:j]
            i = j
            if word in _OPERATORS:
                toks.append(_Tok("op", word))
                continue
            bare = _TRAILING.sub("", word)
            possessive = _POSSESSIVE.match(bare)
            if possessive:
                # "nginx's" means nginx: as a phrase ("nginx s") it would miss plain "nginx"
                word = bare = possessive.group(1)
            prefix = bare.endswith("*")
            stem = bare.rstrip("*")
            letters = sum(c.isalnum() for c in stem)
            toks.append(_Tok("word", stem if prefix else word, prefix and letters >= MIN_PREFIX))
    return toks


def _split_term(tok: _Tok) -> tuple[list[_Tok], list[str]]:
    """A word or phrase -> its searchable non-CJK parts and its CJK runs."""
    parts: list[_Tok] = []
    runs: list[str] = []
    pieces = split_cjk(tok.text)
    for k, (is_cjk, piece) in enumerate(pieces):
        if is_cjk:
            runs.append(piece)
        elif _TOKENIZER.has_token(piece):
            last = k == len(pieces) - 1
            parts.append(_Tok(tok.kind, piece.strip() if tok.kind == "phrase" else piece,
                              tok.prefix and last))
    return parts, runs


def _normal(word: str) -> str:
    return word.lower().replace("\u2019", "'").strip(_EDGE_PUNCT + "'\"")


def build_query(text: str) -> SearchPlan:
    """Plan the FTS5 queries for ``text``; raise :class:`QueryError` if there is nothing to run."""
    if not isinstance(text, str):
        raise QueryError(f"the query must be text, not {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Search for a few distinctive words or a short quoted phrase instead"
        )
    cleaned, _ = clean_text(_CONTROL.sub(" ", text))
    toks = _lex(cleaned)
    # Parentheses alone are punctuation ("(see nginx docs)"); they group only around operators.
    advanced = any(t.kind == "op" for t in toks)
    plan = SearchPlan(text=text)
    terms: list[_Tok] = []
    for tok in toks:
        if tok.kind in ("word", "phrase"):
            parts, runs = _split_term(tok)
            terms.extend(parts)
            plan.cjk.extend(r for r in runs if r not in plan.cjk)
    if not terms and not plan.cjk:
        raise QueryError(
            f"the query {text[:80]!r} has no letters or digits to search for; "
            "use words that appear in the conversation you are looking for"
        )
    plan.needles = list(dict.fromkeys(_normal(t.text) for t in terms if _normal(t.text)))
    plan.needles += [r for r in plan.cjk if r not in plan.needles]
    if advanced and not plan.cjk:
        plan.advanced = True
        plan.strict = _Parser(toks).parse() or None
        if plan.strict is None:
            raise QueryError(f"the query {text[:80]!r} has operators but nothing to search for")
        return plan
    unique: dict[tuple[str, str, bool], _Tok] = {}
    for t in terms:
        unique.setdefault((t.kind, _normal(t.text), t.prefix), t)
    words = list(unique.values())
    content = [t for t in words if t.kind == "phrase" or t.prefix or _normal(t.text) not in STOPWORDS]
    if content or plan.cjk:
        words = content
    if len(words) + len(plan.cjk) > MAX_TERMS:
        raise QueryError(
            f"the query has {len(words) + len(plan.cjk)} search terms; the limit is {MAX_TERMS}. "
            "Keep the few words that identify what you are looking for"
        )
    quoted = [quote(t.text, t.prefix) for t in words]
    if quoted:
        plan.strict = " AND ".join(quoted)
    if len(quoted) + len(plan.cjk) > 1:
        # "" when there are only CJK runs: the search ORs those itself
        plan.fallback = " OR ".join(quoted)
    return plan


class _Parser:
    """Forgiving recursive descent over the tokens; emits only valid FTS5.

    FTS5 precedence, tightest first: NOT, AND (also implicit), OR.
    """

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def parse(self) -> str:
        parts: list[str] = []
        while self.peek() is not None:
            expr = self.parse_or()
            if expr:
                parts.append(expr)
            if self.peek() is not None and self.peek().kind == ")":  # type: ignore[union-attr]
                self.i += 1  # unmatched ")": skip it
        return " AND ".join(parts)

    def parse_or(self) -> str:
        parts: list[str] = []
        while True:
            expr = self.parse_and()
            if expr:
                parts.append(expr)
            tok = self.peek()
            if tok is not None and tok.kind == "op" and tok.text == "OR":
                self.i += 1
                continue
            break
        return " OR ".join(parts)

    def parse_and(self) -> str:
        parts: list[str] = []
        while True:
            tok = self.peek()
            if tok is None or tok.kind == ")" or (tok.kind == "op" and tok.text == "OR"):
                break
            if tok.kind == "op":  # AND (implicit anyway), or a NOT with nothing on its left
                self.i += 1
                if tok.text == "NOT" and not parts:
                    self.parse_primary()  # a bare negation cannot be expressed: drop it
                continue
            expr = self.parse_not()
            if expr:
                parts.append(expr)
        return " AND ".join(parts)

    def parse_not(self) -> str:
        left = self.parse_primary()
        while True:
            tok = self.peek()
            if tok is None or tok.kind != "op" or tok.text != "NOT":
                return left
            self.i += 1
            right = self.parse_primary()
            if left and right:
                left = f"{left} NOT {right}"

    def parse_primary(self) -> str:
        tok = self.peek()
        if tok is None:
            return ""
        if tok.kind == "(":
            self.i += 1
            inner = self.parse_or()
            tok = self.peek()
            if tok is not None and tok.kind == ")":
                self.i += 1
            return f"({inner})" if inner else ""
        if tok.kind in ("word", "phrase"):
            self.i += 1
            parts, _runs = _split_term(tok)
            return " AND ".join(quote(p.text, p.prefix) for p in parts)
        return ""
