"""How the adapter drives one Hermes provider object over time: every call on the object's own
thread, and a failed ``initialize`` reported once and tried again later."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import hermes_core_hermes_compat.plugin as bridge
import hermes_core_hermes_compat.slots as slots
import hermes_style
import pytest
from conftest import drop_folder_plugin, run
from hermes_core_hermes_compat import calls

from hermes_core.config import parse_config_text
from hermes_core.errors import ToolError
from hermes_core.replay import RecordingHost
from hermes_core.types import Session, ToolContext

TURNS = [("I keep bees in Utrecht.", "Noted."), ("My hives are on the roof.", "Nice."),
         ("Where are my bees?", "Utrecht.")]


def test_calls_into_one_object_run_on_its_own_thread(core_home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider whose SQLite connection belongs to the thread that opened it works although
    the kernel calls its hooks from several lanes (sqlite3 refuses any other thread)."""
    drop_folder_plugin(core_home, "threadbound", hermes_style.THREAD_BOUND)
    report = run(core_home, TURNS, providers=["file_memory", "hermes-threadbound"],
                 monkeypatch=monkeypatch)
    problems = [p for t in report.turns for p in t["hook_problems"]
                if "threadbound" in p["plugin"]]
    assert problems == []
    assert "I keep bees in Utrecht." in report.turns[2]["prefetch"][-1]["text"]
    db = sqlite3.connect(calls.hermes_home_for(core_home, "threadbound", None) / "turns.db")
    try:
        assert [r[0] for r in db.execute("SELECT user FROM turns")] == [u for u, _ in TURNS]
        methods = {m for (m,) in db.execute("SELECT method FROM calls")}
        threads = {t for (t,) in db.execute("SELECT DISTINCT thread FROM calls")}
    finally:
        db.close()
    assert {"initialize", "prefetch", "sync_turn", "shutdown"} <= methods
    assert len(threads) == 1


def test_pinned_runs_in_order_on_one_thread_and_nested_calls_do_not_wait(tmp_path: Path) -> None:
    pinned = calls.Pinned("test-pinned", tmp_path)
    seen: list[int] = []

    def outer() -> int:
        seen.append(threading.get_ident())
        return int(pinned.run(lambda: threading.get_ident()))  # from inside: runs inline

    try:
        inner = pinned.run(outer)
        assert pinned.run(threading.get_ident) == inner == seen[0] != threading.get_ident()
        with pytest.raises(ZeroDivisionError):
            pinned.run(lambda: 1 / 0)
        assert pinned.run(lambda: "still serving") == "still serving"
    finally:
        pinned.close()


@pytest.fixture
def flaky_host(core_home: Path) -> RecordingHost:
    drop_folder_plugin(core_home, "flaky", hermes_style.FLAKY.format(fail_times=2))
    loaded = parse_config_text("memory:\n  providers: [hermes-flaky]\n", core_home / "config.yaml")
    host = RecordingHost.load(core_home, config=loaded, entry_points=False, directories=False,
                              plugins=[("hermes_compat", bridge)])
    assert isinstance(host, RecordingHost)
    return host


def attempts(core_home: Path) -> list[str]:
    log = calls.hermes_home_for(core_home, "flaky", None) / "attempts.log"
    return log.read_text(encoding="utf-8").split()


def doctor(core_home: Path) -> dict[str, dict[str, object]]:
    """``hermes-core doctor --json`` of ``core_home`` in another process, checks by name."""
    out = subprocess.run([sys.executable, "-m", "hermes_core", "doctor", "--json"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HERMES_CORE_HOME": str(core_home)})
    return {c["name"]: c for c in json.loads(out.stdout)}


def test_failed_initialize_is_reported_once_and_tried_again_later(
        flaky_host: RecordingHost, core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        (flaky,) = flaky_host.activate_memory_providers()
        s1 = Session("s1")
        for _ in range(3):  # every hook of the session: skipped, no new attempt, no raise
            assert flaky.prefetch("bees?", s1) is None  # type: ignore[attr-defined]
            assert flaky.system_prompt_block(s1) is None  # type: ignore[attr-defined]
        assert attempts(core_home) == ["s1"]
        tool = flaky_host.tools()["flaky_ping"][0]
        with pytest.raises(ToolError, match="the flaky store is not mounted"):
            tool.handler({}, ToolContext(session=s1))
        # doctor, in another process, names the failure of the last session
        (core_home / "config.yaml").write_text("memory:\n  providers: [hermes-flaky]\n",
                                               encoding="utf-8")
        last = doctor(core_home)["Hermes plugin hermes-flaky: last session"]
        assert not last["ok"] and "the flaky store is not mounted" in str(last["detail"])

        # a later session tries again (it fails a second time), then the pause passes
        monkeypatch.setattr(slots, "RETRY_SECONDS", 0.0)
        s2 = Session("s2")
        assert flaky.prefetch("bees?", s2) is None  # type: ignore[attr-defined]
        assert attempts(core_home) == ["s1", "s2"]
        assert flaky.prefetch("bees?", s2) == "flaky recall"  # type: ignore[attr-defined]
        assert attempts(core_home) == ["s1", "s2", "s2"]
        assert tool.handler({}, ToolContext(session=s2)) == '{"answer": "pong"}'
        warnings = [w for w in flaky_host.records["hermes_compat"].warnings
                    if "initialize() raised" in w]
        assert len(warnings) == 1 and "the flaky store is not mounted" in warnings[0]
        # once it ran, doctor no longer names a failure
        names = set(doctor(core_home))
        assert "Hermes plugin hermes-flaky: last session" not in names
        assert "Hermes plugin hermes-flaky" in names
    finally:
        flaky_host.shutdown()


def test_failed_initialize_leaves_the_turn_working(core_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "flaky", hermes_style.FLAKY.format(fail_times=100))
    report = run(core_home, TURNS, providers=["file_memory", "hermes-flaky"],
                 monkeypatch=monkeypatch)
    assert [t["reply"] for t in report.turns] == ["Noted.", "Nice.", "Utrecht."]
    assert [p for t in report.turns for p in t["hook_problems"] if "flaky" in p["plugin"]] == []
    assert attempts(core_home) == [report.turns[0]["session_id"]]  # one try in the session
