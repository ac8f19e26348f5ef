"""Fuzzing session search: any string gives results or a clear message, never an exception.

Builds a small archive from the benchmark corpus (plus messages with glued words: URLs, paths,
``key=value``, HTML), then runs ``--queries`` generated queries through ``search_messages``:
stored words decorated the way people and models type them (glued with , ; + / = < >, prefixes
cut past the stem, ``-word``, operators alone, deep parentheses, lone surrogates, emoji, random
code points). Prints:

* exceptions other than the archive's own ``QueryError`` (the target is 0), by type;
* silent empties: a query made around a stored word (not negated, no operators) that returned
  no hit and no message (the target is 0), with examples;
* clear messages (QueryError) by their first words, for a look.

    python bench/fuzz_session_search.py --queries 100000
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from session_corpus import HEAD, Corpus

from hermes_core.plugins.memory.session_archive import QueryError, SessionArchive
from hermes_core.plugins.memory.session_archive.query import STOPWORDS
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.types import Message

GLUED = [
    "see https://example.org/deployment/guide?id=42 for the rollout",
    "the file lives at /srv/app/config/settings.yaml now",
    "set retries=5 and timeout=30 in the client",
    "line one<br>line two<br>compaction finished",
    "windows path C:\\Users\\dev\\project\\build.log was empty",
    "fighting the flaky scheduler again",
]
_WORD = re.compile(r"[a-z]{4,}")


def build(path: Path, sessions: int) -> list[str]:
    corpus = Corpus(seed=7)
    words: set[str] = set()
    with SessionArchive(path, synchronous="normal") as archive:
        for i, (sid, msgs) in enumerate(corpus.sessions()):
            if i >= sessions:
                break
            archive.append_messages(sid, msgs)
            for m in msgs:
                if isinstance(m.content, str):
                    words.update(_WORD.findall(m.content.lower()))
        archive.append_messages("glued", [Message(role="user", content=t) for t in GLUED])
    for t in GLUED:
        words.update(_WORD.findall(t.lower()))
    return sorted(w for w in words if w not in STOPWORDS)


def decorate(rng: random.Random, w: str, words: list[str]) -> tuple[str, bool]:
    """A query around stored word ``w``; True when it must find something."""
    other = rng.choice(words)
    kind = rng.randrange(16)
    if kind == 0:
        return f"{w}{rng.choice(',;+/')}{other}", True
    if kind == 1:
        return f"{w}=1", True
    if kind == 2:
        return f"{w}<br>", True
    if kind == 3:
        cut = max(3, len(w) - rng.randint(0, 3))
        return w[:cut] + "*", True
    if kind == 4:
        return f"{w} -{other}" if other != w else w, other != w and False
    if kind == 5:
        return rng.choice(["AND", "OR", "NOT", "AND AND", "OR NOT"]) + f" {w}", True
    if kind == 6:
        n = rng.randint(1, 400)
        return "(" * n + w + ")" * rng.randint(0, n), True
    if kind == 7:
        n = rng.randint(1, 400)
        return "(" * n + f"{w} OR {other}" + ")" * n, False
    if kind == 8:
        return w + rng.choice(["\ud800", "\udfff", "\udc00 x"]), True
    if kind == 9:
        return f"https://example.com/{w}/{other}", True
    if kind == 10:
        return f"{w} AND NOT {other}", False
    if kind == 11:
        return "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0x80, 0x2fff),
                                       rng.randint(0x1f300, 0x1faff)])) for _ in range(
            rng.randint(1, 30))), False
    if kind == 12:
        return f'"{w}" {rng.choice(["?", "!", "...", "--", "…"])}', True
    if kind == 13:
        return rng.choice(["\U0001f600\U0001f680", "\U0001f44d", "\u2728\u2728"]), False
    if kind == 14:
        return f"{w}'s {rng.choice(['', '?', '.'])}", True
    return w.upper() + " " + rng.choice(["(", ")", '"', "*", "^", ":"]), True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=150)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.db"
        words = build(path, args.sessions)
        words = [w for w in words if w not in HEAD or rng.random() < 0.5]
        errors: collections.Counter[str] = collections.Counter()
        messages: collections.Counter[str] = collections.Counter()
        empties: list[str] = []
        examples: dict[str, str] = {}
        start = time.perf_counter()
        with SessionArchive(path) as archive:
            for _ in range(args.queries):
                query, must = decorate(rng, rng.choice(words), words)
                try:
                    result = search_messages(archive, query, limit=3, context=False)
                except QueryError as exc:
                    messages[" ".join(str(exc).split()[:6])] += 1
                    if "bug" in str(exc):
                        errors["QueryError(bug)"] += 1
                        examples.setdefault("QueryError(bug)", query)
                    continue
                except Exception as exc:
                    errors[type(exc).__name__] += 1
                    examples.setdefault(type(exc).__name__, repr(query)[:120])
                    continue
                if must and not result.hits:
                    empties.append(query)
        took = time.perf_counter() - start
    print(f"{args.queries:,} queries over {len(words):,} stored words in {took:.1f} s "
          f"({args.queries / took:,.0f} queries/s)")
    print(f"exceptions: {sum(errors.values())} (target 0)")
    for name, n in errors.most_common():
        print(f"  {n:>7} {name}   e.g. {examples[name]}")
    print(f"silent empty for a stored word: {len(empties)} (target 0)")
    for q in empties[:10]:
        print(f"  {q!r}")
    print("clear messages:")
    for text, n in messages.most_common(8):
        print(f"  {n:>7} {text} ...")


if __name__ == "__main__":
    main()
