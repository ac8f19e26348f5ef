"""The on-disk format of a memory file and the arithmetic of its budget.

A file holds entries separated by a line containing only ``§``: the separator string is
``"\\n§\\n"``. Entries may span several lines and may contain ``§`` anywhere except as a whole
line after their first line (such a line would read back as a separator). The budget counts the
characters of the joined text, separators included: two 3-character entries use 3 + 3 + 3 = 9.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DELIMITER",
    "canonical_text",
    "dedupe",
    "entry_problem",
    "find_matches",
    "joined_size",
    "normalise_newlines",
    "parse_entries",
    "percent",
    "squash",
    "usage_label",
]

DELIMITER = "\n§\n"
_DELIM_LEN = len(DELIMITER)


def normalise_newlines(text: str) -> str:
    """``text`` with Windows (CRLF) and old Mac (CR) line endings turned into ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_entries(text: str) -> list[str]:
    """Split ``text`` into stripped, non-empty entries, keeping duplicates and order.

    Line endings are normalised first: a file saved by an editor with CRLF endings holds the same
    entries as its LF twin (without this its separators would not be seen and every fact would
    read back as one entry).
    """
    out = []
    for part in normalise_newlines(text).split(DELIMITER):
        part = part.strip()
        if part:
            out.append(part)
    return out


def canonical_text(entries: Iterable[str]) -> str:
    """What the store writes for ``entries`` (no trailing newline; empty list -> empty file)."""
    return DELIMITER.join(entries)


def joined_size(entries: list[str]) -> int:
    """The budget ``entries`` use: their characters plus one separator between each pair."""
    if not entries:
        return 0
    return sum(map(len, entries)) + _DELIM_LEN * (len(entries) - 1)


def dedupe(entries: Iterable[str]) -> list[str]:
    """``entries`` without repeats; the first occurrence keeps its place."""
    return list(dict.fromkeys(entries))


def percent(size: int, limit: int) -> int:
    """Whole percent of the budget in use, capped at 100."""
    return min(100, size * 100 // limit) if limit > 0 else 100


def usage_label(size: int, limit: int) -> str:
    """``85% — 1,870/2,200`` (thousands separators, as in the prompt header)."""
    return f"{percent(size, limit)}% — {size:,}/{limit:,}"


def entry_problem(entry: str, limit: int) -> str | None:
    """Why ``entry`` (already stripped) cannot be stored under ``limit``, or ``None``."""
    if not entry:
        return "the content is empty (or only whitespace); write the fact to remember"
    if len(entry) > limit:
        return (
            f"the entry is {len(entry):,} characters but the whole store holds at most "
            f"{limit:,}; shorten it to the essential fact (well under {limit:,} characters)"
        )
    if "\n§" in entry:
        lines = entry.split("\n")
        if "§" in lines[1:]:
            return (
                "a line holding only '§' separates entries and cannot appear inside one; "
                "remove that line or add text to it"
            )
    return None


def squash(text: str) -> str:
    """``text`` as loose matching and ``forget`` compare it: runs of whitespace as one space,
    case folded."""
    # the kernel's erasure_log.squash says the same; importing it would load hashlib at start-up
    return " ".join(text.split()).casefold()


def find_matches(entries: list[str], needle: str) -> list[int]:
    """Indexes of the entries containing ``needle``.

    Exact (case-sensitive) containment is tried first. When nothing matches exactly, a second pass
    ignores case and collapses runs of whitespace, so a model quoting "user prefers  Vim" still
    finds "User prefers vim". The caller applies the ambiguity rules to whatever is returned.
    """
    exact = [i for i, entry in enumerate(entries) if needle in entry]
    if exact:
        return exact
    loose = squash(needle)
    if not loose:
        return []
    return [i for i, entry in enumerate(entries) if loose in squash(entry)]
