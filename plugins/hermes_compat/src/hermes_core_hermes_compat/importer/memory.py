"""MEMORY.md / USER.md of a Hermes home into the curated memory, as one version per file.

Hermes' files hold entries separated by a line with only ``§`` (the same format hermes-core's file
memory uses). The entries go through the memory tool the active provider offers (the tool whose
:class:`~hermes_core.kinds.Curation` role is ``memory``: the kernel's public way in, the one the
background review uses), in one all-or-nothing call per file, from a session whose ``origin`` is
``import``: the store's own checks apply (limits, threat scan), an entry already stored is a
no-op, and the history records one version with origin ``import``.

When the whole file does not fit the store's limit, the longest leading run of entries that fits
is stored and every entry left out is reported with the store's reason; nothing is dropped
silently. An entry the store refuses on its own (its threat scan, or longer than the whole
store) is left out first, with its own reason, so that it does not take the entries after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.kinds import Tool
from hermes_core.toolrun import ToolRouter
from hermes_core.types import Session, ToolCall

from .home import HermesImportError

__all__ = ["FILES", "MemoryImport", "call_tool", "import_memory", "read_entries"]

DELIMITER = "\n§\n"
#: Hermes file -> the store target
FILES = {"MEMORY.md": "memory", "USER.md": "user"}
IMPORT_SESSION = Session(id="hermes-import", platform="import",
                         attributes={"origin": "import", "origin_session_id": "hermes-import"})


@dataclass
class MemoryImport:
    target: str
    file: str
    entries: int = 0
    added: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    #: entries not stored, each with the store's reason
    left: list[dict[str, str]] = field(default_factory=list)
    #: those of ``left`` the store refused on their own (a threat pattern, longer than the whole
    #: store), not for want of room beside the others
    refused: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "file": self.file, "entries": self.entries,
                "added": len(self.added), "already_there": len(self.already), "left": self.left}


def read_entries(path: Path) -> list[str]:
    """The entries of a Hermes memory file (split on the ``§`` line, stripped, no empties,
    first occurrence of a repeat kept)."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is no part of the text
    except UnicodeDecodeError as exc:
        raise HermesImportError(f"{path} is not UTF-8 text ({exc}); re-save it as UTF-8 and run "
                                "the import again; nothing was imported") from None
    except OSError as exc:
        raise HermesImportError(f"{path} cannot be read ({exc.strerror or exc}): make it a file "
                                "you can read, or move it aside, and run the import again; "
                                "nothing was imported") from None
    out: list[str] = []
    for part in text.split(DELIMITER):
        entry = part.strip()
        if entry and entry not in out:
            out.append(entry)
    return out


def call_tool(router: ToolRouter, tool: str, args: dict[str, Any], call_id: str
              ) -> dict[str, Any]:
    """The JSON object a tool answers with (``success`` false, its text as ``error``, when the
    answer is not one), called from the import's session."""
    outcome = router.run_one(ToolCall(id=call_id, name=tool, arguments=args), IMPORT_SESSION)
    try:
        data = json.loads(outcome.content)
    except ValueError:
        return {"success": False, "error": outcome.content}
    return data if isinstance(data, dict) else {"success": False, "error": outcome.content}


def _count(router: ToolRouter, name: str, target: str) -> tuple[int, set[str]]:
    """How many entries ``target`` holds now, and those it lists in full: a refused remove of
    text no entry holds answers with the current entries (the tool's retry aid, long ones
    shortened) and changes nothing."""
    answer = call_tool(router, name, {"action": "remove", "target": target,
                                      "old_text": "hermes-import-probe-5f0c1e9a7d"},
                       "hermes-import-0")
    listed = answer.get("current_entries")
    if not isinstance(listed, list):
        return 0, set()
    note = re.search(r"of (\d+) entries", str(answer.get("current_entries_note") or ""))
    return (int(note.group(1)) if note else len(listed)), {str(e) for e in listed}


def import_memory(memory_tool: tuple[Tool, str] | None, path: Path, target: str
                  ) -> MemoryImport:
    """Add ``path``'s entries to ``target`` through the memory tool; see the module docstring."""
    result = MemoryImport(target, path.name)
    entries = read_entries(path)
    result.entries = len(entries)
    if not entries:
        return result
    if memory_tool is None:
        result.left = [{"entry": e, "reason": "no active memory provider offers a memory tool "
                        "(add file_memory to memory.providers)"} for e in entries]
        return result
    name = memory_tool[0].name
    router = ToolRouter({name: memory_tool})
    before, listed = _count(router, name, target)
    entries, over = _refuse_one_by_one(router, name, target, entries, result)
    start = len(entries)
    if over is not None:  # from just past the run the store's figures say fits, not from the top
        start = min(_fitting(over, entries, listed) + 1, len(entries))
    kept, answer, reason = _first_stored(router, name, target, entries, range(start, 0, -1))
    if kept == start < len(entries):  # more fit than the figures said (a long entry the store
        # listed shortened was counted as new): the longer runs too
        more, bigger, _ = _first_stored(router, name, target, entries,
                                        range(len(entries), start, -1))
        if bigger is not None:
            kept, answer = more, bigger
    if over is not None:  # the store's first answer (later ones add the model's per-turn cap)
        reason = str(over.get("error") or over)
    if answer is not None:
        added = int(answer.get("entry_count", before)) - before
        # the store skipped the adds it already held: those are the ones it did not add
        result.added = [e for e in entries[:kept] if e not in listed][:added]
        result.already = [e for e in entries[:kept] if e not in result.added]
    # listed in full by the store, so surely there (a long entry is listed shortened)
    result.already += [e for e in entries[kept:] if e in listed]
    result.left = [{"entry": e, "reason": reason} for e in entries[kept:] if e not in listed]
    result.left += result.refused
    return result


def _first_stored(router: ToolRouter, name: str, target: str, entries: list[str],
                  runs: range) -> tuple[int, dict[str, Any] | None, str]:
    """Add the leading run of ``entries`` of each length in ``runs`` in turn (a refused batch
    changes nothing) until the store takes one: its length and answer, and the first refusal's
    error (0 and None when none was taken)."""
    reason = ""
    for keep in runs:
        ops = [{"action": "add", "content": e} for e in entries[:keep]]
        answer = call_tool(router, name, {"target": target, "operations": ops},
                           f"hermes-import-{keep}")
        if answer.get("success"):
            return keep, answer, reason
        reason = reason or str(answer.get("error") or answer)
    return 0, None, reason


def _fitting(over: dict[str, Any], entries: list[str], listed: set[str]) -> int:
    """How long a leading run of ``entries`` fits, by the figures of the store's answer over the
    limit (``usage``: ``... 1,870/2,200``) and its separator; all of them without figures."""
    figures = re.search(r"([\d,]+)/([\d,]+)", str(over.get("usage") or ""))
    if figures is None:
        return len(entries)
    size, limit = (int(n.replace(",", "")) for n in figures.groups())
    fit = 0
    for entry in entries:
        if entry not in listed:  # the store skips an add of an entry it holds
            size += len(entry) + (len(DELIMITER) if size else 0)
            if size > limit:
                break
        fit += 1
    return fit


def _refuse_one_by_one(router: ToolRouter, name: str, target: str, entries: list[str],
                       result: MemoryImport) -> tuple[list[str], dict[str, Any] | None]:
    """``entries`` without those the store refuses for themselves (each put in
    ``result.refused`` with its reason), so that they do not take the entries after them, and
    the store's answer when the rest is over its limit (None when it was stored); what is left
    can still be refused for room (the caller stores the longest run that fits)."""
    entries = list(entries)
    while entries:
        # a lone entry is sent twice (the second add is a no-op): a batch names the refused one
        batch = entries * 2 if len(entries) == 1 else entries
        answer = call_tool(router, name, {"target": target, "operations": [
            {"action": "add", "content": e} for e in batch]}, "hermes-import-check")
        if answer.get("success"):
            return entries, None  # stored: the caller's first try is a no-op
        if "attempts_left" in answer or answer.get("done"):
            return entries, answer  # over the limit
        number = answer.get("operation")
        if not isinstance(number, int) or not 1 <= number <= len(entries):
            return entries, None  # not about one entry (the store cannot be written): the caller
        error = str(answer.get("error") or answer)
        error = re.sub(r"^Operation \d+ \(add\): | No operation was applied \(a batch is "
                       r"all-or-nothing\)\.$", "", error)
        result.refused.append({"entry": entries.pop(number - 1), "reason": error})
    return entries, None
