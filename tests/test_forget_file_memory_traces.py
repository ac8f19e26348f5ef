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


def test_a_memory_write_of_a_turn_in_flight_does_not_bring_the_subject_back(home, backend):
    """A turn in flight when ``forget`` lands still holds the subject in its context; when its
    model then saves it with the ``memory`` tool, the entry is forgotten again (as the session
    archive does with what such a turn writes). A conversation loaded after the forget may save
    it anew."""
    from agent_support import make_host

    from hermes_core.plugins.memory.file_memory import FileMemory
    from hermes_core.storage.erasures import forget_noted, note_forget
    from hermes_core.types import Session, ToolContext

    host = make_host(home, providers=[FileMemory])
    provider = host.instances["memory-provider:file_memory"]
    tool, _plugin = host.tools()["memory"]
    old = Session(id="s-old")
    provider.system_prompt_block(old)  # its prompt was built (its history loaded) before
    note = note_forget("Lisbon", "all", home=home, storage_url=backend)
    assert provider.forget("Lisbon", "all", False).deleted == 0  # nothing saved yet
    forget_noted(note, home=home, storage_url=backend)
    provider.on_erasure(1)  # another conversation's next turn heeded the erasure first
    tool.invoke({"action": "add", "target": "user", "content": "Lives in Lisbon"},
                ToolContext(session=old))
    review = Session(id="s-old:review", parent_session_id="s-old", attributes={
        "origin": "memory_review", "origin_session_id": "s-old"})  # the memory review's
    tool.invoke({"action": "add", "target": "memory", "content": "Trip to Lisbon booked"},
                ToolContext(session=review))
    store = provider.store_for(old)
    assert not [e for e in store.entries("user") if "lisbon" in e.lower()]
    assert not [e for e in store.entries("memory") if "lisbon" in e.lower()]
    dumped = json.dumps([v.to_dict() for v in store.history.read()])  # type: ignore[union-attr]
    assert "lisbon" not in dumped.casefold()
    new = Session(id="s-new")
    provider.system_prompt_block(new)  # loaded after the forget: the user says it again
    tool.invoke({"action": "add", "target": "user", "content": "Moved back to Lisbon"},
                ToolContext(session=new))
    assert "Moved back to Lisbon" in store.entries("user")
    provider.on_erasure(1)  # a server rebuilds the old conversation: it is loaded afresh
    provider.system_prompt_block(old)
    tool.invoke({"action": "add", "target": "user", "content": "Works in Lisbon"},
                ToolContext(session=old))
    assert "Works in Lisbon" in store.entries("user")
    host.shutdown()
