"""``forget`` in the file memory leaves the subject nowhere: not in the background curator's
saved proposal, not in the reason a model gave for a change kept in the history.

Both backends (the ``storage_url`` fixture: the memory folder, then a real PostgreSQL
database); the curator's model is the loopback Messages API through the real anthropic client
(only its words are canned).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory import FileMemoryConfig
from hermes_core.plugins.memory.file_memory.backend import open_store
from hermes_core.plugins.memory.file_memory.background import PROPOSAL_FILE, maybe_curate
from hermes_core.plugins.memory.file_memory.config import CuratorConfig
from hermes_core.plugins.memory.file_memory.versions import forget_entries
from hermes_core.testing import MessagesAPIServer


@pytest.fixture
def backend(home: Path, storage_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    else:
        monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    return storage_url


class _Context:
    def __init__(self) -> None:
        self.logger = logging.getLogger("test.curator")
        self.config = None


def saved_proposal(home: Path, store: Any) -> str:
    own = getattr(store, "saved_proposal", None)
    if own is not None:
        return own() or ""
    path = home / "memories" / PROPOSAL_FILE
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_the_saved_curation_proposal_does_not_keep_a_forgotten_entry(home, backend):
    store = open_store(FileMemoryConfig(), home, backend)
    for entry in ("User lives in Berlin", "Works at Acme", "User moved to Lisbon"):
        store.add("user", entry)
    config = CuratorConfig(every_sessions=1)
    assert maybe_curate(store, config, _Context())[0]["applied"] is False
    assert "lisbon" in saved_proposal(home, store).lower()  # it lists the store's entries
    assert forget_entries(store, "Lisbon").deleted == 1
    assert "lisbon" not in saved_proposal(home, store).lower()


def test_a_model_reason_naming_the_subject_is_forgotten_with_its_entries(home, backend):
    (home / "memories").mkdir()
    store = open_store(FileMemoryConfig(), home, backend)
    for entry in ("Has a flat in Lisbon", "The flat has two bedrooms", "Name: Ana"):
        store.add("user", entry)
    answer = json.dumps({"changes": [{"kind": "merge", "entries": [1, 2],
                                      "new": "Has a two-bedroom flat in Lisbon",
                                      "reason": "both describe the Lisbon flat"}]})
    with MessagesAPIServer([answer]) as api:
        config = (f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  max_retries: 0\n"
                  "  auxiliary_model: claude-haiku-aux\n")
        (home / "config.yaml").write_text(config, encoding="utf-8")
        result = CliRunner().invoke(cli, ["memory", "curate", "--target", "user", "--model",
                                          "--apply"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert forget_entries(store, "lisbon").deleted == 1
    dumped = json.dumps([v.to_dict() for v in store.history.read()])  # type: ignore[union-attr]
    assert "lisbon" not in dumped.casefold()
    shown = CliRunner().invoke(cli, ["memory", "history", "--target", "user"],
                               catch_exceptions=False)
    assert shown.exit_code == 0 and "lisbon" not in shown.output.casefold()
