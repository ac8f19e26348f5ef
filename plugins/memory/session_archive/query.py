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
* runs of CJK letters go to the CJK indexes (see cjk.py) instead of the word index;
* ``,`` ``;`` and ``+`` separate words; a word glued from several tokens (a URL, a path,
  ``key=value``) is a phrase first, then its tokens ALL, then ANY (never silently empty);
* ``-word`` (a leading minus) excludes messages holding the word; ``X AND NOT Y`` excludes Y;
* an operator with no operand on a side (``AND`` alone, ``cats OR``) is an ordinary word;
* parentheses nest at most :data:`MAX_DEPTH` deep (a clear error beyond; FTS5's own parser
  has a fixed stack), and every expression has at most :data:`MAX_TERMS` terms;
* a prefix ``deploym*`` also matches the stems the index stores for its words (``deploy``):
  the Porter stemmer cuts ``deployment`` to ``deploy``, so a prefix longer than the stem would
  find nothing; see ``expand`` in :func:`build_query`.

A query that is too long or has nothing to search for raises :class:`QueryError` with what to do.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from .cjk import split_cjk
from .errors import ExclusionOnlyQuery, QueryError
from .records import clean_text

__all__ = [
    "MAX_DEPTH", "MAX_QUERY_CHARS", "MAX_TERMS", "SearchPlan", "build_query", "negated_expr", "quote",
    "word_for_stem",
]

MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
#: parentheses nested deeper than this are refused with a clear message
MAX_DEPTH = 8
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

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = sqlite3.connect(":memory:", check_same_thread=False)
            self._con.execute(
                "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 "
                "remove_diacritics 2')"
            )
            self._con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
        return self._con

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one process-wide instance
    def has_token(self, word: str) -> bool:
        if _ASCII_ALNUM.search(word):
            return True
        if not any(unicodedata.category(ch)[0] in "LNM" or ord(ch) > 0xFFFF for ch in word):
            return False
        return bool(self.stems(word))

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one process-wide instance
    def stems(self, word: str) -> tuple[str, ...]:
        """The tokens the index stores for ``word`` (Porter stems, lower case)."""
        with self._lock:
            con = self._connection()
            con.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (word,))
            found = tuple(r[0] for r in con.execute("SELECT term FROM v ORDER BY term"))
            con.execute("DELETE FROM t")
            return found


_TOKENIZER = _Tokenizer()
#: endings tried to find a word the stemmer reduces to a given stem (the stemmer is not
#: idempotent: "deploy" itself becomes "deploi", while "deployment" becomes "deploy")
_SUFFIXES = ("", "ment", "ing", "s", "ed", "er", "ation", "ness", "e", "ly", "al", "ive")


def word_for_stem(stem: str) -> str | None:
    """A word whose indexed token is exactly ``stem``, or None when none is found."""
    for suffix in _SUFFIXES:
        if _TOKENIZER.stems(stem + suffix) == (stem,):
            return stem + suffix
    return None


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "word", "phrase", "op", "(" or ")"
    text: str = ""
    prefix: bool = False
    #: a leading minus: the word excludes messages instead of requiring them
    negated: bool = False


@dataclass
class SearchPlan:
    """What to run for one query."""

    text: str
    #: FTS5 expression over the word index for the first try (None: no word terms)
    strict: str | None = None
    #: every token of every term ANDed, tried when ``strict`` (which keeps glued words such as
    #: URLs and paths as phrases) finds nothing (None: same as ``strict``)
    loose: str | None = None
    #: the ranked-OR fallback when ``strict`` finds nothing (None: no fallback)
    fallback: str | None = None
    #: the OR fallback's terms one by one (the search ranks the distinctive ones; see search.py)
    fallback_terms: list[str] = field(default_factory=list)
    #: FTS5 expression of the words to exclude (``-word``), applied to every try
    exclude: str | None = None
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


_SEPARATORS = ",;+"
_PIECE = re.compile(r"[^\W_]+")


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace() or ch in _SEPARATORS:
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
            while j < n and not text[j].isspace() and text[j] not in '"()' + _SEPARATORS:
                j += 1
            word = text[i:j]
            i = j
            if word in _OPERATORS:
                toks.append(_Tok("op", word))
                continue
            negated = len(word) > 1 and word[0] == "-" and word[1].isalnum()
            if negated:
                word = word[1:]
            bare = _TRAILING.sub("", word)
            possessive = _POSSESSIVE.match(bare)
            if possessive:
                # "nginx's" means nginx: as a phrase ("nginx s") it would miss plain "nginx"
                word = bare = possessive.group(1)
            prefix = bare.endswith("*")
            stem = bare.rstrip("*")
            letters = sum(c.isalnum() for c in stem)
            toks.append(_Tok("word", stem if prefix else word, prefix and letters >= MIN_PREFIX,
                             negated))
    return _demote_operators(toks)


def _is_operand_end(tok: _Tok | None) -> bool:
    return tok is not None and (tok.kind in ("word", "phrase", ")"))


def _has_operands(tok: _Tok, prev: _Tok | None, nxt: _Tok | None) -> bool:
    """Whether the operator ``tok`` has an operand on each side (``AND NOT`` counts as one)."""
    left_ok = _is_operand_end(prev) or (
        tok.text == "NOT" and prev is not None and prev.kind == "op" and prev.text == "AND")
    right_ok = nxt is not None and (
        nxt.kind in ("word", "phrase", "(")
        or (tok.text == "AND" and nxt.kind == "op" and nxt.text == "NOT"))
    return left_ok and right_ok


def _strip_edge_operators(out: list[_Tok]) -> None:
    """Drop the operators left at either end of ``out`` (in place)."""
    while out and out[-1].kind == "op":
        out.pop()
    while out and out[0].kind == "op":
        out.pop(0)


def _demote_operators(toks: list[_Tok]) -> list[_Tok]:
    """An operator without an operand on each side is not an operator: it is dropped, or, when
    the query has nothing else (``AND`` alone), searched as the word it spells."""
    out: list[_Tok] = []
    demoted: list[_Tok] = []
    for k, tok in enumerate(toks):
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if tok.kind == "op" and not _has_operands(tok, out[-1] if out else None, nxt):
            demoted.append(_Tok("word", tok.text))
            continue
        out.append(tok)
    # an operator left dangling by a dropped one ("a AND AND b" -> "a AND b" is fine, but
    # "AND OR b" drops both): operators must still sit between operands
    _strip_edge_operators(out)
    if not any(t.kind in ("word", "phrase") for t in out):
        return [t for t in out if t.kind != "op"] + demoted
    return out


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


def _tokens_of(tok: _Tok) -> list[_Tok]:
    """The single tokens of a word glued from several (``a/b.c``, ``key=1``); a user's
    quoted phrase stays whole."""
    if tok.kind == "phrase":
        return [tok]
    pieces = [p for p in _PIECE.findall(tok.text) if _TOKENIZER.has_token(p)]
    if len(pieces) <= 1:
        return [tok]
    return [_Tok("word", p, tok.prefix and k == len(pieces) - 1) for k, p in enumerate(pieces)]


def _normal(word: str) -> str:
    return word.lower().replace("\u2019", "'").strip(_EDGE_PUNCT + "'\"")


Expand = Callable[[str], list[str]]


def _term(tok: _Tok, expand: Expand | None) -> str:
    """One term as FTS5; a prefix also matches the stems ``expand`` knows for it."""
    expr = quote(tok.text, tok.prefix)
    if tok.prefix and expand is not None:
        extra = [quote(t) for t in expand(tok.text.lower())]
        if extra:
            return "(" + " OR ".join([expr, *extra]) + ")"
    return expr


def _depth(toks: list[_Tok]) -> int:
    depth = deepest = 0
    for t in toks:
        if t.kind == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif t.kind == ")" and depth:
            depth -= 1
    return deepest


def _check_text(text: str) -> None:
    """Refuse what is not text, or text too long to be a query."""
    if not isinstance(text, str):
        raise QueryError(f"the query must be text, not {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Search for a few distinctive words or a short quoted phrase instead"
        )


def _too_many(count: int) -> QueryError:
    return QueryError(
        f"the query has {count} search terms; the limit is {MAX_TERMS}. "
        "Keep the few words that identify what you are looking for")


def _nothing_to_search(text: str, ex_parts: list[_Tok]) -> QueryError:
    """The error for a query without a term to search for (only ``-word`` exclusions, or no
    letters or digits at all)."""
    if ex_parts:
        return ExclusionOnlyQuery(
            f"the query {text[:80]!r} only excludes words (-word); add a word to search for, "
            "or put the word in quotes (\"-word\") to search for it as written")
    return QueryError(
        f"the query {text[:80]!r} has no letters or digits to search for; "
        "use words that appear in the conversation you are looking for"
    )


def _unique(toks: list[_Tok]) -> list[_Tok]:
    """``toks`` without repeats (same kind, normal form and prefix), first one kept."""
    seen: dict[tuple[str, str, bool], _Tok] = {}
    for t in toks:
        seen.setdefault((t.kind, _normal(t.text), t.prefix), t)
    return list(seen.values())


def _plan_expression(plan: SearchPlan, toks: list[_Tok], terms: list[_Tok],
                     expand: Expand | None) -> SearchPlan:
    """An expression with operators, honoured as written (no fallback)."""
    deepest = _depth(toks)
    if deepest > MAX_DEPTH:
        raise QueryError(
            f"the query nests parentheses {deepest} deep; the limit is {MAX_DEPTH}. "
            "Remove the extra parentheses")
    if len(terms) > MAX_TERMS:
        raise _too_many(len(terms))
    plan.advanced = True
    plan.strict = _Parser(toks, expand).parse() or None
    if plan.strict is None:
        raise ExclusionOnlyQuery(
            f"the query {plan.text[:80]!r} has operators but nothing to search for")
    return plan


def _plan_words(plan: SearchPlan, terms: list[_Tok], expand: Expand | None) -> SearchPlan:
    """A plain query: all its words (stopwords dropped unless nothing else is left), then all
    their single tokens, then any of them."""
    words = _unique(terms)
    content = [t for t in words if t.kind == "phrase" or t.prefix or _normal(t.text) not in STOPWORDS]
    if content or plan.cjk:
        words = content
    if len(words) + len(plan.cjk) > MAX_TERMS:
        raise _too_many(len(words) + len(plan.cjk))
    quoted = [_term(t, expand) for t in words]
    if quoted:
        plan.strict = " AND ".join(quoted)
    singles = _unique([s for t in words for s in _tokens_of(t)])
    loose = [_term(t, expand) for t in singles][: MAX_TERMS * 2]
    if quoted and loose != quoted:
        plan.loose = " AND ".join(loose)
    if len(loose) + len(plan.cjk) > 1:
        # "" when there are only CJK runs: the search ORs those itself
        plan.fallback = " OR ".join(loose)
        plan.fallback_terms = loose
    return plan


def _search_terms(plan: SearchPlan, toks: list[_Tok]) -> list[_Tok]:
    """The searchable non-CJK parts of the words and phrases of ``toks``; their CJK runs are
    added to ``plan.cjk`` (once each)."""
    terms: list[_Tok] = []
    for tok in toks:
        if tok.kind in ("word", "phrase"):
            parts, runs = _split_term(tok)
            terms.extend(parts)
            plan.cjk.extend(r for r in runs if r not in plan.cjk)
    return terms


def build_query(text: str, expand: Expand | None = None) -> SearchPlan:
    """Plan the FTS5 queries for ``text``; raise :class:`QueryError` if there is nothing to run.

    ``expand(prefix)`` returns indexed stems a prefix query should match too (the archive
    passes one that looks them up in its index); without it a prefix is matched as written.
    """
    _check_text(text)
    cleaned, _ = clean_text(_CONTROL.sub(" ", text))
    lexed = _lex(cleaned)
    toks = [t for t in lexed if not t.negated]
    plan = SearchPlan(text=text)
    terms = _search_terms(plan, toks)
    ex_parts = [p for t in lexed if t.negated for p in _split_term(t)[0]]
    if ex_parts:
        plan.exclude = " OR ".join(_term(p, expand) for p in ex_parts)
    if not terms and not plan.cjk:
        raise _nothing_to_search(text, ex_parts)
    plan.needles = list(dict.fromkeys(_normal(t.text) for t in terms if _normal(t.text)))
    plan.needles += [r for r in plan.cjk if r not in plan.needles]
    # Parentheses alone are punctuation ("(see nginx docs)"); they group only around operators.
    if any(t.kind == "op" for t in toks) and not plan.cjk:
        return _plan_expression(plan, toks, terms, expand)
    return _plan_words(plan, terms, expand)


class _Parser:
    """Forgiving recursive descent over the tokens; emits only valid FTS5.

    FTS5 precedence, tightest first: NOT, AND (also implicit), OR. Recursion is bounded:
    :func:`build_query` refuses parentheses nested deeper than :data:`MAX_DEPTH`.
    """

    def __init__(self, toks: list[_Tok], expand: Expand | None = None) -> None:
        self.toks = toks
        self.i = 0
        self.expand = expand

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
            if tok.kind == "op" and tok.text == "NOT":
                self.i += 1
                right = self.parse_primary()
                if parts and right:
                    # "X AND NOT Y", "X NOT Y": (X) NOT (Y); NOT is left-associative and binds
                    # tightest, so a chain of them needs no parentheses (FTS5's parser stack
                    # is small)
                    left = parts[0] if len(parts) == 1 else f"({' AND '.join(parts)})"
                    parts = [f"{left} NOT {right}"]
                continue  # a bare negation cannot be expressed: dropped
            if tok.kind == "op":  # AND: implicit anyway
                self.i += 1
                continue
            expr = self.parse_primary()
            if expr:
                parts.append(expr)
        return " AND ".join(parts)

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
            return " AND ".join(_term(p, self.expand) for p in parts)
        self.i += 1  # a stray operator
        return ""


_EXPR_TOKEN = re.compile(r'"(?:[^"]|"")*"\*?|\b(?:AND|OR|NOT)\b|[()]')


def negated_expr(plan: SearchPlan) -> str | None:
    """The FTS5 expression of what ``plan`` leaves out: its ``-word`` exclusions and the operand
    of each ``NOT`` of an expression (``"dogs"`` for ``cats AND NOT dogs``), joined by ``OR``;
    None when it excludes nothing. A message found by meaning alone must not match it."""
    parts = [plan.exclude] if plan.exclude else []
    if plan.advanced and plan.strict:
        toks = _EXPR_TOKEN.findall(plan.strict)
        i = 0
        while i < len(toks) - 1:
            if toks[i] == "NOT":
                end = i + 1
                if toks[end] == "(":
                    depth = 0
                    for end in range(i + 1, len(toks)):
                        depth += (toks[end] == "(") - (toks[end] == ")")
                        if depth == 0:
                            break
                parts.append(" ".join(toks[i + 1:end + 1]))
                i = end
            i += 1
    return " OR ".join(f"({p})" for p in parts) if parts else None
