"""The real Hermes plugins from the package index, pip-installed (pinned) by the hermes-compat
tox env: each listed, replayed beside the built-ins, its recall fenced in the prompt, its tools
offered and answering, its own store holding the turns; two at once; no file outside the home.

The model's words are scripted (examples/first-week.jsonl plus a closing turn that calls the
plugin's tool); everything else is the plugins' own code.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
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
    #: memory.prefetch_timeout of its runs
    prefetch_timeout: float = 0.3

    def memory(self, providers: str = "") -> str:
        """The ``memory:`` section of its runs (``providers`` a YAML list, or none)."""
        listed = f"  providers: {providers}\n" if providers else ""
        return f"memory:\n{listed}  prefetch_timeout: {self.prefetch_timeout}\n"


CASES = [
    # verbatim's recall answers only from claims its judge extracted at a session's end; the
    # scripted question comes before that, so it abstains (its own, correct answer)
    # (the replay sends turns back to back: a prefetch waits on the provider object's one
    # thread for the previous turn's sync_turn and queue_prefetch, which a user's typing hides)
    Case("hermes-verbatim", "verbatim_recall", {"query": "Rotterdam"}, expect=None,
         config="hermes-verbatim:\n  capture.enabled: true\n", store="hermes-compat/verbatim",
         recalls=False, prefetch_timeout=10),
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
                 config=SLOW_INIT + case.memory() + case.config, monkeypatch=monkeypatch)
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


def test_lossless_engine_replay(core_home: Path, user_home: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """lossless-hermes-py (the LCM engine): selected as the context engine, its DAG store in the
    home ingests the history at each compaction (a small context window forces them), its tools
    are offered and answer."""
    before = listing(user_home)
    lines = [json.loads(line) for line in FIRST_WEEK.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    lines.append({"user": "grep our history for Rotterdam",
                  "tool_calls": [{"name": "lcm_grep", "arguments": {"pattern": "Rotterdam"}}],
                  "assistant": "Found it."})
    report = run(core_home, lines, providers=["file_memory", "session_archive"],
                 engine="hermes-lossless-hermes", config="llm:\n  context_window: 3000\n",
                 monkeypatch=monkeypatch)
    assert report.engine == "hermes-lossless-hermes"
    assert report.summary["write_failures"] == 0
    assert {"lcm_grep", "lcm_describe", "lcm_expand"} <= set(report.tools)
    assert [c for t in report.turns for c in t["compactions"]]
    call = report.turns[-1]["tool_calls"][0]
    assert call["ok"], call
    json.loads(call["result"])
    assert stored(core_home / "hermes-compat", b"Rotterdam")
    assert listing(user_home) == before


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_listed_and_cli_replay_exits_0(case: Case, core_home: Path, user_home: Path) -> None:
    """As a user runs it: ``plugins list`` shows the provider, ``hermes-core replay
    examples/first-week.jsonl`` with it beside file_memory and session_archive exits 0."""
    if case.setup:
        case.setup(core_home, user_home)
    (core_home / "config.yaml").write_text(
        case.memory(f"[file_memory, session_archive, {case.name}]") + SLOW_INIT + case.config,
        encoding="utf-8")
    before = listing(user_home)
    listed = cli("plugins", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    records = {r["name"]: r for r in json.loads(listed.stdout)}
    bridge = records["hermes_compat"]
    assert f"memory-provider:{case.name}" in bridge["registers"] and not bridge["error"]
    out = cli("replay", str(FIRST_WEEK), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert case.name in report["providers"]
    assert report["summary"]["write_failures"] == 0
    assert listing(user_home) == before


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_core", *args], capture_output=True,
                          text=True, timeout=300)


def test_two_real_providers_at_once(core_home: Path, user_home: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _local_memory_setup(core_home, user_home)
    report = run(core_home, FIRST_WEEK,
                 providers=["file_memory", "session_archive", "hermes-verbatim",
                            "hermes-local-memory"],
                 config=SLOW_INIT + "hermes-verbatim:\n  capture.enabled: true\n",
                 monkeypatch=monkeypatch)
    assert report.providers[-2:] == ["hermes-verbatim", "hermes-local-memory"]
    assert report.summary["write_failures"] == 0
    assert stored(core_home / "hermes-compat" / "verbatim", b"Rotterdam")
    assert stored(core_home / "hermes-compat" / "local_memory", b"Rotterdam")
    assert {"verbatim_recall", "memory_search"} <= set(report.tools)


def test_status_of_the_installed_plugins(core_home: Path, user_home: Path) -> None:
    _local_memory_setup(core_home, user_home)
    out = cli("hermes", "plugins", "--json")
    assert out.returncode == 0, out.stderr
    found = {p["name"]: p for p in json.loads(out.stdout)["plugins"]}
    assert found["hermes-verbatim"]["status"] == "ready"
    # a folder plugin whose provider does not subclass Hermes' base class (no get_config_schema)
    assert found["hermes-local-memory"]["status"] == "ready"
    assert found["hermes-local-memory"]["source"] == "folder"
    assert found["hermes-lossless-hermes"]["status"] == "ready"
    assert found["hermes-lossless-hermes"]["kind"] == "context-engine"
    # a cloud service: its key is named
    assert found["hermes-itsuki"]["status"] == "needs service or key"
    assert "ITSUKI_API_KEY" in found["hermes-itsuki"]["fix"]
    # no vault configured in ~/.hermes/config.yaml
    assert found["hermes-llmwiki"]["status"] == "needs service or key"
    # installed without cashew-brain (sentence-transformers and torch), and unconfigured
    assert found["hermes-cashew"]["status"] == "needs service or key"
    # an embedding backend: sentence-transformers, or the openai SDK (not installed by tox)
    backend = importlib.util.find_spec("openai") or importlib.util.find_spec("sentence_transformers")
    semantic = found["hermes-semantic-memory"]["status"]
    assert semantic == ("ready" if backend else "needs service or key")

