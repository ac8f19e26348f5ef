"""Pinned entries: facts the user asked to keep, which the curator never drops or rewrites.

``hermes-core memory pin TEXT`` finds the one entry containing TEXT (the same matching as
``memory remove``) and records its whole text in ``memories/pinned.json``. A pin is a note *about*
an entry, kept beside the stores, so it costs nothing in the system prompt. When the entry is
replaced or removed, its pin no longer matches anything and ``memory pins`` shows it as stale.
``forget`` removes the pins of what it forgets. The database store (``storage.url``) keeps them
in a table instead, through its ``read_pins`` / ``update_pins`` methods.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hermes_core.atomic import atomic_write

from .entries import find_matches
from .errors import AmbiguousMatch, NoMatch
from .store import TARGETS, MemoryStore, _locked, check_target

__all__ = ["PINS_FILE", "parse_pins", "pin", "pinned_entries", "pins_path", "read_pins", "unpin"]

PINS_FILE = "pinned.json"


def pins_path(store: MemoryStore) -> Path:
    return store.directory / PINS_FILE


def parse_pins(text: str | None) -> dict[str, list[str]]:
    """target -> pinned entry texts, from the JSON of a pins file or row (empty when there is
    none or it is not a JSON object of lists)."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): [str(x) for x in v] for k, v in data.items() if isinstance(v, list)}


def read_pins(store: MemoryStore) -> dict[str, list[str]]:
    """target -> pinned entry texts (empty when there is no file or it is unreadable)."""
    own = getattr(store, "read_pins", None)  # the database store keeps them in a table
    if own is not None:
        return own()  # type: ignore[no-any-return]
    try:
        return parse_pins(pins_path(store).read_text(encoding="utf-8"))
    except OSError:
        return {}


def pinned_entries(store: MemoryStore, target: str) -> set[str]:
    return set(read_pins(store).get(target, []))


def _save(store: MemoryStore, pins: dict[str, list[str]]) -> None:
    store.directory.mkdir(parents=True, exist_ok=True)
    body = json.dumps({k: v for k, v in pins.items() if v}, ensure_ascii=False, indent=1)
    atomic_write(pins_path(store), (body + "\n").encode("utf-8"))


def _update(store: MemoryStore, change: Callable[[dict[str, list[str]]], bool]) -> None:
    """Apply ``change`` to the pins under their lock; save them when it returns True."""
    own = getattr(store, "update_pins", None)
    if own is not None:
        own(change)
        return
    with _locked(pins_path(store)):
        pins = read_pins(store)
        if change(pins):
            _save(store, pins)


def _elsewhere(store: MemoryStore, target: str, text: str) -> str:
    """The hint for a text not found in ``target``: the other store's option when it is
    there, else where to look."""
    for other in TARGETS:
        if other != target and text.strip() and find_matches(store.read(other).entries,
                                                             text.strip()):
            return f"it is in {store.path(other).name}: add --target {other}"
    return "'hermes-core memory show' lists them"


def pin(store: MemoryStore, target: str, text: str) -> str:
    """Pin the one entry of ``target`` containing ``text``; return its whole text."""
    target = check_target(target)
    entries = store.read(target).entries
    found = find_matches(entries, text.strip()) if text.strip() else []
    if not found:
        raise NoMatch(f"no entry of {store.path(target).name} contains {text!r}; "
                      + _elsewhere(store, target, text), target=target)
    if len({entries[i] for i in found}) > 1:
        raise AmbiguousMatch(f"{text!r} matches several entries; quote more of the one to pin",
                             matches=[entries[i][:80] for i in found], target=target)
    entry = entries[found[0]]

    def add(pins: dict[str, list[str]]) -> bool:
        listed = pins.setdefault(target, [])
        if entry in listed:
            return False
        listed.append(entry)
        return True

    _update(store, add)
    return entry


def unpin(store: MemoryStore, target: str, text: str) -> list[str]:
    """Remove the pins of ``target`` containing ``text``; return the texts unpinned."""
    target = check_target(target)
    needle = text.strip().casefold()
    gone: list[str] = []

    def matching(listed: list[str]) -> list[str]:
        found = [p for p in listed if needle and needle in p.casefold()]
        if not found:
            raise NoMatch(f"no pinned entry of {store.path(target).name} contains {text!r}",
                          target=target)
        return found

    # checked before the pins' lock too: a memory with no pins (a user key that has no memory
    # yet: no folder) is answered without creating anything
    matching(read_pins(store).get(target, []))

    def remove(pins: dict[str, list[str]]) -> bool:
        listed = pins.get(target, [])
        gone[:] = matching(listed)
        pins[target] = [p for p in listed if p not in gone]
        return True

    _update(store, remove)
    return gone


def drop_pins(store: MemoryStore, matches: dict[str, list[str]]) -> None:
    """Forget the pins of entries that were deleted (``forget``)."""
    if getattr(store, "update_pins", None) is None and not pins_path(store).exists():
        return

    def drop(pins: dict[str, list[str]]) -> bool:
        changed = False
        for target, entries in matches.items():
            kept = [p for p in pins.get(target, []) if p not in entries]
            if len(kept) != len(pins.get(target, [])):
                pins[target] = kept
                changed = True
        return changed

    _update(store, drop)
