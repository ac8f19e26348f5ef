"""The real Hermes plugins from the package index, pip-installed (pinned) by the hermes-compat
tox env: each listed, replayed beside the built-ins, its recall fenced in the prompt, its tools
offered and answering, its own store holding the turns; two at once; no file outside the home.

The model's words are scripted (examples/first-week.jsonl plus a closing turn that calls the
plugin's tool); everything else is the plugins' own code.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FIRST_WEEK, listing, recall_in_prompt, run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verbatim") is None,
    reason="the real Hermes plugins are pip-installed by `tox -e hermes-compat`")

#: initialising some real plugins takes seconds the first time (key generation, migrations)
SLOW_INIT = "hooks:\n  timeouts:\n    system_prompt_block: 60\n    on_message: 60\n"


def _llmwiki_setup(core: Path, user: Path) -> None:
    # llmwiki reads ~/.hermes/config.yaml itself (it ignores hermes_home): the user's own file
    vault = core / "wiki"
    vault.mkdir()
    (user / ".hermes").mkdir()
    (user / ".hermes" / "config.yaml").write_text(
        f"memory:\n  llmwiki:\n    vault_path: {vault}\n", encoding="utf-8")


def _local_memory_setup(core: Path, user: Path) -> None:
    # hermes-local-memory installs only as a folder plugin, written by its own installer
    import hermes_local_memory
    from hermes_local_memory.hermes_plugin import write_plugin_shim

    root = Path(hermes_local_memory.__file__).resolve().parent.parent
    write_plugin_shim(core / "hermes-plugins" / "local_memory", package_root=root)


@dataclass
class Case:
    name: str
    tool: str
    arguments: dict[str, Any]
    config: str = ""
    setup: Callable[[Path, Path], None] | None = None
    #: text the closing tool call's result must contain (None: the plugin's own answer, any)
    expect: str | None = "Rotterdam"
    #: where the plugin keeps its store, relative to the hermes-core home
    store: str = ""
    #: whether its prefetch recalls something for first-week's turns
    recalls: bool = True


CASES = [
    # verbatim's recall answers only from claims its judge extracted at a session's end; the
    # scripted question comes before that, so it abstains (its own, correct answer)
    Case("hermes-verbatim", "verbatim_recall", {"query": "Rotterdam"}, expect=None,
         config="hermes-verbatim:\n  capture.enabled: true\n", store="hermes-compat/verbatim",
         recalls=False),
    Case("hermes-local-memory", "memory_context", {"query": "Rotterdam"}, expect="Local Memory",
         setup=_local_memory_setup, store="hermes-compat/local_memory"),
    # search_wiki searches the compiled wiki; synced turns go to the daily chronicle
    Case("hermes-llmwiki", "search_wiki", {"query": "Rotterdam"}, setup=_llmwiki_setup,
         expect=None, store="wiki", recalls=False),
]


def stored(folder: Path, needle: bytes) -> bool:
    """Whether any file under ``folder`` (SQLite files and their journals, Markdown) holds
    ``needle``."""
    return any(needle in p.read_bytes() for p in folder.rglob("*") if p.is_file())


def transcript(case: Case) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in FIRST_WEEK.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return [*lines, {"user": "Where is my team based? Check your notes.",
                     "tool_calls": [{"name": case.tool, "arguments": case.arguments}],
                     "assistant": "Rotterdam."}]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_real_plugin_in_a_replay(case: Case, core_home: Path, user_home: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if case.setup:
        case.setup(core_home, user_home)
    before = listing(user_home)
    report = run(core_home, transcript(case),
                 providers=["file_memory", "session_archive", case.name],
                 config=SLOW_INIT + case.config, monkeypatch=monkeypatch)
    assert case.name in report.providers
    assert report.summary["write_failures"] == 0
    problems = [p for t in report.turns for p in t["hook_problems"] if case.name in p["plugin"]]
    assert problems == []
    # its tools are offered, and the scripted call is answered by its own store
    assert case.tool in report.tools
    call = report.turns[-1]["tool_calls"][0]
    assert call["plugin"].endswith(case.name) and call["ok"], call
    json.loads(call["result"])
    if case.expect is not None:
        assert case.expect in call["result"], call["result"][:500]
    # its own store holds the synced turns (a user message of the transcript)
    assert stored(core_home / case.store, b"Rotterdam"), case.store
    # its recall reached the model's prompt, fenced and labelled with its name
    recalled = [p for t in report.turns for p in t["prefetch"] if p["provider"] == case.name]
    assert len(recalled) == len(report.turns)  # asked every turn
    if case.recalls:
        assert any(p["text"] for p in recalled), recalled
        assert recall_in_prompt(case.name)
    # nothing written outside the hermes-core home
    assert listing(user_home) == before
    assert (core_home / "hermes-compat").is_dir()
