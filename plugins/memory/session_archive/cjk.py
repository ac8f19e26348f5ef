"""CJK text: finding runs of CJK letters and the n-grams the CJK indexes store.

FTS5's unicode61 tokenizer treats a whole run of Chinese or Japanese letters as one token, so a
word inside it can never match. The archive therefore keeps two small extra indexes over the CJK
runs of the (few) messages that have any: a trigram index (queries of 3+ characters) and an index of
unigrams and bigrams (queries of 1-2 characters, which trigrams cannot answer). The functions here
compute what those indexes store; they are registered as SQL functions so that triggers can call
them and the indexes stay in sync without the application's help.
"""

from __future__ import annotations

import functools
import re

__all__ = ["CJK_CLASS", "cjk_grams", "cjk_runs", "has_cjk", "split_cjk"]

# Letters only: CJK punctuation (U+3000-303F except the iteration mark) is a separator for
# unicode61, and a separator inside a stored gram would split it into two tokens.
CJK_CLASS = (
    "\u3005"  # 々 iteration mark
    "\u3041-\u3096\u309d-\u309f"  # hiragana
    "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9d"  # katakana (full and half width)
    "\u1100-\u11ff\u3131-\u318e\uac00-\ud7a3"  # hangul jamo and syllables
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs, ext. A, compatibility
    "\U00020000-\U0002a6df\U0002a700-\U0002ebef\U00030000-\U0003134f"  # ext. B-G
)


@functools.cache
def _run() -> re.Pattern[str]:
    """A run of CJK letters: compiled on first use (about 5 ms for this class, not paid by an
    import of the archive)."""
    return re.compile(f"[{CJK_CLASS}]+")


def has_cjk(text: str | None) -> bool:
    return bool(text) and _run().search(text) is not None  # type: ignore[arg-type]


def _runs(*texts: str | None) -> list[str]:
    out: list[str] = []
    for text in texts:
        if text and _run().search(text) is not None:
            out.extend(_run().findall(text))
    return out


def cjk_runs(content: str | None, tool_calls: str | None = None) -> str | None:
    """The CJK runs of a message, one per line (the trigram index's text), or None if none.

    A 3+ character query matches as a phrase of trigrams, so a match never spans two runs: the
    newline between runs is part of every trigram that crosses it, and queries never contain one.
    """
    runs = _runs(content, tool_calls)
    return "\n".join(runs) if runs else None


def cjk_grams(content: str | None, tool_calls: str | None = None) -> str | None:
    """Distinct CJK unigrams and bigrams of a message, space-separated, or None if none.

    The grams index stores only which messages contain each gram (detail=none), so a 1- or
    2-character query is one index lookup instead of a scan over every message.
    """
    runs = _runs(content, tool_calls)
    if not runs:
        return None
    grams: dict[str, None] = {}
    for run in runs:
        for i, ch in enumerate(run):
            grams[ch] = None
            if i + 1 < len(run):
                grams[run[i : i + 2]] = None
    return " ".join(grams)


def split_cjk(text: str) -> list[tuple[bool, str]]:
    """Split ``text`` into (is_cjk, part) pieces, in order."""
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _run().finditer(text):
        if m.start() > pos:
            out.append((False, text[pos : m.start()]))
        out.append((True, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append((False, text[pos:]))
    return out
