"""The curator's optional background run, at the end of a session.

Off by default. ``file_memory.curator.every_sessions: N`` runs it after every N-th session end
(counted in ``memories/curator-state.json``, so the count survives restarts and is shared by
processes), ``file_memory.curator.fill_trigger: 0.8`` whenever a store is at least 80 % full.
With ``auto_apply: true`` a proposal is applied at once (one version per store, undone with
``hermes-core memory rollback``); otherwise it is saved to ``memories/curation-proposal.json``
for ``hermes-core memory curate`` to show, and a line is logged. It never raises: the session end
must not fail because of housekeeping.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_core.atomic import atomic_write

from .config import CuratorConfig
from .entries import joined_size
from .history import Provenance
from .store import TARGETS, MemoryStore, _locked

__all__ = ["PROPOSAL_FILE", "STATE_FILE", "due", "maybe_curate"]

STATE_FILE = "curator-state.json"
PROPOSAL_FILE = "curation-proposal.json"


def _count_session(store: MemoryStore) -> int:
    own = getattr(store, "count_curator_session", None)  # the database store: a table row
    if own is not None:
        return int(own())
    path = store.directory / STATE_FILE
    store.directory.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            count = int(data.get("sessions", 0)) if isinstance(data, dict) else 0
        except (OSError, ValueError, TypeError):
            count = 0
        count += 1
        atomic_write(path, json.dumps({"sessions": count}).encode())
    return count


def due(store: MemoryStore, config: CuratorConfig) -> bool:
    """Whether this session end should run the curator (counts the session)."""
    if config.every_sessions > 0 and _count_session(store) % config.every_sessions == 0:
        return True
    if config.fill_trigger > 0:
        for target in TARGETS:
            if joined_size(store.read(target).entries) >= config.fill_trigger * store.limit(target):
                return True
    return False


def maybe_curate(store: MemoryStore, config: CuratorConfig, context: Any) -> list[dict[str, Any]]:
    """Run the curator when :func:`due`; return what it proposed (and whether it applied it)."""
    from .curator import CuratorError, apply_proposal, model_changes, propose
    from .pins import pinned_entries

    logger = context.logger
    try:
        if not due(store, config):
            return []
        out = []
        for target in TARGETS:
            proposal = propose(store, target, target_ratio=config.target_ratio,
                               near_duplicate=config.near_duplicate)
            if config.use_model:
                try:
                    llm = context.llm("auxiliary")
                    proposal = model_changes(proposal, llm, pins=pinned_entries(store, target))
                except Exception as exc:  # the model is optional: keep the offline proposal
                    logger.warning("file_memory curator: the model's part failed (%s); using "
                                   "the offline proposal", exc)
            if not proposal.changes:
                continue
            entry = proposal.to_dict()
            entry["applied"] = False
            if config.auto_apply:
                try:
                    entry["applied"] = apply_proposal(
                        store, proposal, by=Provenance("curator")) is not None
                except CuratorError as exc:
                    logger.warning("file_memory curator: %s", exc.message)
            out.append(entry)
            logger.info("file_memory curator: %s %s: %d change(s), %d chars freed",
                        "applied to" if entry["applied"] else "proposed for",
                        store.path(target).name, len(proposal.changes), proposal.freed)
        if out and not config.auto_apply:
            body = json.dumps(out, ensure_ascii=False, indent=1).encode("utf-8")
            save = getattr(store, "save_proposal", None)
            if save is not None:
                save(body)
            else:
                atomic_write(store.directory / PROPOSAL_FILE, body)
        return out
    except Exception as exc:
        logger.warning("file_memory curator: background run failed: %s", exc)
        return []
