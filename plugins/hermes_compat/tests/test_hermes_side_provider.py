"""The reverse direction: hermes-agent 0.19.0's own MemoryManager runs hermes-core's stack.

The provider is installed the way Hermes 0.19.0 finds one (a folder plugin in
``$HERMES_HOME/plugins/hermes_core/``, written by the install step), loaded by Hermes' own
``plugins.memory.load_memory_provider`` and driven by Hermes' ``MemoryManager`` in a subprocess
(Hermes' top-level ``agent``/``plugins`` packages and its HERMES_HOME stay out of this process).
The hermes-core home behind it is real: file memory, the SQLite session archive with
``prefetch: true``. No LLM is involved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

try:  # the real distribution, not a stand-in for its module names
    metadata.version("hermes-agent")
except metadata.PackageNotFoundError:
    pytest.skip("needs hermes-agent==0.19.0 (tox -e hermes-agent)", allow_module_level=True)

from hermes_core_hermes_compat.hermes_side.install import main as install

from hermes_core.cli import cli

DRIVE = r'''
import json, sys
from agent.memory_manager import MemoryManager
from plugins.memory import load_memory_provider

provider = load_memory_provider("hermes_core")
assert provider is not None and provider.name == "hermes_core", provider
mm = MemoryManager()
mm.add_provider(provider)
mm.initialize_all(session_id="hs-one", platform="cli")
out = {"system": mm.build_system_prompt()}
mm.sync_all("my favourite database is zqpostgres", "noted, zqpostgres it is",
            session_id="hs-one")
mm.flush_pending(timeout=30)
mm.on_session_switch("hs-two", parent_session_id="", reset=True, reason="new_session")
out["prefetch"] = mm.prefetch_all("which database is zqpostgres", session_id="hs-two")
out["tools"] = sorted(s["name"] for s in mm.get_all_tool_schemas())
out["search"] = json.loads(mm.handle_tool_call("hermes_core_session_search",
                                               {"query": "zqpostgres"}))
mm.shutdown_all()
print(json.dumps(out))
'''


def test_hermes_memory_manager_runs_the_hermes_core_stack(tmp_path: Path) -> None:
    hermes, core = tmp_path / "hermes", tmp_path / "core"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("memory:\n  provider: hermes_core\n")
    assert install(["install", str(hermes)]) == 0
    assert "MemoryProvider" in (hermes / "plugins" / "hermes_core" / "__init__.py").read_text()
    (core / "memories").mkdir(parents=True)
    (core / "memories" / "MEMORY.md").write_text("The team deploys on zqtuesday")
    (core / "config.yaml").write_text(
        "memory:\n  prefetch_timeout: 10\nsession_archive:\n  prefetch: true\n")

    env = {**os.environ, "HERMES_HOME": str(hermes), "HERMES_CORE_HOME": str(core)}
    done = subprocess.run([sys.executable, "-c", DRIVE], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    # several hermes-core providers behind Hermes' one slot: the file memory's block ...
    assert "zqtuesday" in out["system"]
    # ... and the archive's recall of the earlier session, through hermes-core's prefetch
    assert "zqpostgres" in out["prefetch"] and "session_archive" in out["prefetch"]
    # the hybrid archive search as a tool, renamed so it shadows no Hermes tool
    assert "hermes_core_session_search" in out["tools"] and "memory" not in out["tools"]
    assert "hs-one" in json.dumps(out["search"])

    # sync_turn landed in hermes-core's archive
    found = CliRunner().invoke(cli, ["sessions", "search", "zqpostgres", "--json"],
                               env={"HERMES_CORE_HOME": str(core)}, catch_exceptions=False)
    hits = json.loads(found.stdout)["hits"]
    assert {h["session_id"] for h in hits} == {"hs-one"}
    assert {h["role"] for h in hits} == {"user", "assistant"}


def test_install_refuses_a_missing_home(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert install(["install", str(tmp_path / "nope")]) == 1
    assert "is not a folder" in capsys.readouterr().err
    assert install([]) == 2


LOOP_PLUGIN = '''
from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider
from hermes_core_hermes_compat.hermes_side.provider import HermesCoreMemory


class Loop(MemoryProvider):
    """What selecting the provider through the bridge would do: serve the stack to itself."""

    name = "loop"

    def __init__(self, config, context):
        super().__init__(config, context)
        HermesCoreMemory(context.home).initialize("inner", platform="cli")


@hookimpl
def register_memory_providers(register):
    register(Loop)
'''


def test_the_provider_refuses_to_serve_the_stack_it_is_part_of(tmp_path: Path) -> None:
    core = tmp_path / "core"
    (core / "plugins" / "loop").mkdir(parents=True)
    (core / "plugins" / "loop" / "__init__.py").write_text(LOOP_PLUGIN)
    (core / "config.yaml").write_text("memory:\n  providers: [file_memory, session_archive, "
                                      "loop]\n")
    from hermes_core_hermes_compat.hermes_side.provider import HermesCoreMemory

    provider = HermesCoreMemory(core)
    provider.initialize("outer", platform="cli")  # the looping provider is skipped, not fatal
    try:
        names = {provider._host.instance_name(k) for k in provider._host.providers()}
        assert names == {"file_memory", "session_archive"}
        assert "hermes_core_session_search" in {s["name"] for s in provider.get_tool_schemas()}
    finally:
        provider.shutdown()


BRANCH = r'''
from agent.memory_manager import MemoryManager
from plugins.memory import load_memory_provider

mm = MemoryManager()
mm.add_provider(load_memory_provider("hermes_core"))
mm.initialize_all(session_id="hs-trunk", platform="cli")
mm.sync_all("the trunk turn zqtrunk", "noted", session_id="hs-trunk")
mm.flush_pending(timeout=30)
# what Hermes' /branch sends (hermes_cli/cli_commands_mixin.py)
mm.on_session_switch("hs-twig", parent_session_id="hs-trunk", reset=False, reason="branch")
mm.sync_all("the branch turn zqtwig", "noted", session_id="hs-twig")
mm.flush_pending(timeout=30)
mm.shutdown_all()
'''


def test_a_hermes_branch_is_a_branch_in_the_archive(tmp_path: Path) -> None:
    """Hermes' /branch (``reason="branch"``, ``reset=False``) reaches the stack as a branch: the
    archive keeps the new session as ``origin: branch`` of its parent, as ``import hermes`` does
    for a branch of state.db. It was announced as a resume, so the archive filed it as one."""
    hermes, core = tmp_path / "hermes", tmp_path / "core"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("memory:\n  provider: hermes_core\n")
    assert install(["install", str(hermes)]) == 0
    env = {**os.environ, "HERMES_HOME": str(hermes), "HERMES_CORE_HOME": str(core)}
    done = subprocess.run([sys.executable, "-c", BRANCH], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    shown = CliRunner().invoke(cli, ["sessions", "show", "hs-twig", "--json"],
                               env={"HERMES_CORE_HOME": str(core)}, catch_exceptions=False)
    session = json.loads(shown.stdout)
    session = session.get("session", session)
    assert session["parent_session_id"] == "hs-trunk"
    assert session["origin"] == "branch", session


LATE_SYNC = r'''
from agent.memory_manager import MemoryManager
from plugins.memory import load_memory_provider

mm = MemoryManager()
mm.add_provider(load_memory_provider("hermes_core"))
mm.initialize_all(session_id="hs-first", platform="cli")
mm.sync_all("the first turn zqfirst", "noted", session_id="hs-first")
mm.flush_pending(timeout=30)
# Hermes runs sync_all on its background worker and /resume's on_session_switch on the CLI
# thread: the last turn's sync can run after the switch. It names its session.
mm.on_session_switch("hs-other", parent_session_id="", reset=False, reason="resume")
mm.sync_all("the late turn zqlate", "noted", session_id="hs-first")
mm.sync_all("the next turn zqnext", "noted", session_id="hs-other")
mm.flush_pending(timeout=30)
mm.shutdown_all()
'''


def test_a_turn_synced_after_a_switch_lands_in_its_own_session(tmp_path: Path) -> None:
    """sync_turn names the session of its turn (session_id=): a turn Hermes syncs after a switch
    is stored in that session, not the one switched to (it was filed under the new one)."""
    hermes, core = tmp_path / "hermes", tmp_path / "core"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("memory:\n  provider: hermes_core\n")
    assert install(["install", str(hermes)]) == 0
    env = {**os.environ, "HERMES_HOME": str(hermes), "HERMES_CORE_HOME": str(core)}
    done = subprocess.run([sys.executable, "-c", LATE_SYNC], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]

    def texts(session: str) -> str:
        return CliRunner().invoke(cli, ["sessions", "export", session],
                                  env={"HERMES_CORE_HOME": str(core)},
                                  catch_exceptions=False).stdout

    assert "zqfirst" in texts("hs-first") and "zqlate" in texts("hs-first")
    assert "zqlate" not in texts("hs-other") and "zqnext" in texts("hs-other")


SLOW_RECALL = '''
import threading

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider

RELEASE = threading.Event()


class SlowRecall(MemoryProvider):
    name = "slow-recall"

    @hookimpl
    def prefetch(self, query, session):
        if "zqnext" in query:  # late for this turn: its last answer is what the turn could get
            RELEASE.wait(60)
        return f"recall made for: {query}"

    @hookimpl
    def shutdown(self):
        RELEASE.set()


@hookimpl
def register_memory_providers(register):
    register(SlowRecall)
'''

UNDO = r'''
import json
from agent.memory_manager import MemoryManager
from plugins.memory import load_memory_provider

mm = MemoryManager()
mm.add_provider(load_memory_provider("hermes_core"))
mm.initialize_all(session_id="hs-one", platform="cli")
first = mm.prefetch_all("the question zqundone", session_id="hs-one")
mm.sync_all("the question zqundone", "the answer", session_id="hs-one")
mm.flush_pending(timeout=30)
# Hermes' /undo of that turn (cli.py): the same session, rewound=True
mm.on_session_switch("hs-one", parent_session_id="", reset=False, rewound=True)
after = mm.prefetch_all("another question zqnext", session_id="hs-one")
print(json.dumps({"first": first, "after": after}))
mm.shutdown_all()
'''


def test_hermes_undo_drops_the_recall_prepared_for_the_undone_turn(tmp_path: Path) -> None:
    """Hermes' /undo (``rewound=True``: the transcript cut, "providers caching per-turn state
    should invalidate") drops every provider's last prefetch answer, as /new does: a provider
    late at the next turn contributes nothing, not its recall for the undone message. It was
    passed as a plain resume, and that recall was served."""
    hermes, core = tmp_path / "hermes", tmp_path / "core"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("memory:\n  provider: hermes_core\n")
    assert install(["install", str(hermes)]) == 0
    (core / "plugins" / "slowrecall").mkdir(parents=True)
    (core / "plugins" / "slowrecall" / "__init__.py").write_text(SLOW_RECALL)
    (core / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, slow-recall]\n  prefetch_timeout: 1\n")
    env = {**os.environ, "HERMES_HOME": str(hermes), "HERMES_CORE_HOME": str(core)}
    done = subprocess.run([sys.executable, "-c", UNDO], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "recall made for: the question zqundone" in out["first"]
    assert "zqundone" not in out["after"], out["after"]
