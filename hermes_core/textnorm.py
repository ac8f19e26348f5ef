"""Seeing text the way a reader (or a model) sees it: invisible characters and look-alikes.

Two kernel checks must not be fooled by spelling tricks: the recall fence (:mod:`.fence`) and the
memory plugins' threat scan. Both look at text through :func:`fold`: NFKC (fullwidth and other
compatibility forms become plain ones), the look-alike letters and punctuation NFKC leaves alone
folded to ASCII (Cyrillic and Greek letters, dashes, angle brackets, slashes), and invisible
characters dropped. :func:`fold_with_offsets` also maps every folded character back to the source
text, so a match found in the folded text can be cut out of the original.

"Invisible" is decided by Unicode properties, not by a list of favourites: :func:`is_invisible` is
true for every format character (category ``Cf``), every ``Default_Ignorable_Code_Point`` (soft
hyphen, combining grapheme joiner, variation selectors, Hangul fillers, the tag block, ...) and the
C0/C1 controls other than tab, newline and carriage return.
"""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = [
    "fold",
    "fold_char",
    "fold_with_offsets",
    "invisible_chars",
    "is_default_ignorable",
    "is_invisible",
]

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties), as inclusive ranges.
_DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_KEEP_CONTROLS = frozenset("\t\n\r")


def is_default_ignorable(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _DEFAULT_IGNORABLE)


def is_invisible(ch: str) -> bool:
    """True for a character that renders as nothing (or moves text) but a model still reads."""
    if ch.isascii():
        return (ch < " " and ch not in _KEEP_CONTROLS) or ch == "\x7f"
    category = unicodedata.category(ch)
    if category == "Cf" or (category == "Cc" and ch not in _KEEP_CONTROLS):
        return True
    return is_default_ignorable(ch)


def invisible_chars(text: str) -> list[int]:
    """Offsets of the invisible characters of ``text`` (ASCII text is checked in one pass)."""
    if text.isascii() and text.isprintable():
        return []
    return [i for i, ch in enumerate(text) if is_invisible(ch)]


# Look-alikes NFKC leaves alone, written as escapes so the source stays ASCII: each character of
# _FROM folds to the character at the same position of _TO.
_FROM = (
    # Cyrillic lower and upper
    "\u0430\u0432\u0435\u0451\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445\u0456\u0457"
    "\u0458\u0455\u0501\u051b\u051d\u04bb\u04cf\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420"
    "\u0421\u0422\u0423\u0425\u0406\u0408\u0405"
    # Greek lower and upper
    "\u03b1\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7\u0391\u0392\u0395\u0396\u0397"
    "\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
    # Latin variants
    "\u0261\u0131\u0237\u028f"
    # dashes and minus signs
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\u2e3a\u2e3b\u30fc"
    # angle brackets
    "\u2039\u203a\u3008\u3009\u27e8\u27e9\u276e\u276f\u02c2\u02c3\u1438\u1433\u2329\u232a"
    "\u29fc\u29fd"
    # slashes
    "\u2044\u2215\u29f8\u2571"
)
_TO = (
    "abeekmhopctyxiijsdqwhlABEKMHOPCTYXIJS"
    "aeikvoptuxABEZHIKMNOPTYX"
    "gijy"
    "------------"
    "<><><><><><><><>"
    "////"
)
assert len(_FROM) == len(_TO)
_TABLE = str.maketrans(_FROM, _TO)

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")


def fold_char(ch: str) -> str:
    """The folded form of one character: ``""`` when invisible, else NFKC + look-alike fold."""
    if ch.isascii():
        return "" if is_invisible(ch) else ch
    if is_invisible(ch):
        return ""
    return unicodedata.normalize("NFKC", ch).translate(_TABLE)


def fold(text: str) -> str:
    """``text`` as a reader sees it (see the module docstring); HTML entities are not decoded."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(fold_char(ch) for ch in text)


def fold_with_offsets(text: str, *, entities: bool = True) -> tuple[str, list[int], list[int]]:
    """``(folded, starts, ends)``: folded character ``i`` came from ``text[starts[i]:ends[i]]``.

    With ``entities`` HTML character references (``&lt;``, ``&#60;``, ``&#x3c;``) are decoded
    too, so ``&lt;/memory-context&gt;`` reads as the tag it spells.
    """
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "&" and entities:
            entity = _ENTITY.match(text, i)
            if entity is not None:
                decoded = html.unescape(entity.group())
                if decoded != entity.group():
                    for piece in decoded:
                        for folded in fold_char(piece):
                            out.append(folded)
                            starts.append(i)
                            ends.append(entity.end())
                    i = entity.end()
                    continue
        for folded in fold_char(ch):
            out.append(folded)
            starts.append(i)
            ends.append(i + 1)
        i += 1
    return "".join(out), starts, ends
