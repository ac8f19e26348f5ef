"""What Hermes leaves out, the bridge leaves out: an empty session's end at /new, a turn with no
reply; and what Hermes always does, the bridge does: every provider object is shut down, also one
whose initialize raised or whose neighbour's shutdown raised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hermes_style
from conftest import bridge_host, drop_folder_plugin

from hermes_core.types import EndReason, Message, Session


def _events(core_home: Path) -> list[dict[str, Any]]:
    files = sorted((core_home / "hermes-compat" / "recorder").rglob("calls.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_no_end_for_an_empty_session_and_no_store_of_a_turn_without_reply(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    host = bridge_host(core_home, "memory:\n  providers: [hermes-recorder]\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        empty, full = Session("s-empty"), Session("s-full")
        provider.system_prompt_block(empty)
        provider.on_session_end(empty, [], EndReason.NEW_SESSION)  # /new on a fresh session
        provider.sync_turn(Message("user", "do it"), Message("assistant", "  "), empty, [])
        provider.sync_turn(Message("user", "hi"), Message("assistant", "hello"), empty, [])
        provider.on_session_end(empty, [Message("user", "hi")], EndReason.NEW_SESSION)
        provider.on_session_end(full, [], EndReason.USER_EXIT)  # at exit Hermes does end it
        names = [e["event"] for e in _events(core_home)]
        assert names.count("sync_turn") == 1
        assert names.count("on_session_end") == 2
    finally:
        host.shutdown()


def test_every_object_is_shut_down(core_home: Path) -> None:
    """Under memory.scope: user: bob's initialize raises after opening what it needs, alice's
    shutdown raises; both objects still get shutdown(), and the host shuts down cleanly."""
    source = hermes_style.RECORDER.replace(
        "        self.session = session_id\n",
        "        self.session = session_id\n"
        "        if kwargs.get('user_id') == 'bob':\n"
        "            raise RuntimeError('no store for bob')\n").replace(
        '    def shutdown(self):\n        self._log("shutdown")\n',
        '    def shutdown(self):\n        self._log("shutdown", session=self.session)\n'
        '        if self.session == "s-alice":\n'
        '            raise RuntimeError("alice cannot close")\n')
    assert source.count("RuntimeError") == 2
    drop_folder_plugin(core_home, "recorder", source)
    host = bridge_host(core_home, "memory:\n  scope: user\n  providers: [hermes-recorder]\n")
    provider: Any = host.activate_memory_providers()[0]
    for name in ("alice", "bob"):
        provider.system_prompt_block(Session(f"s-{name}", attributes={"user_id": name}))
    host.shutdown()
    shut = sorted(e["session"] for e in _events(core_home) if e["event"] == "shutdown")
    assert shut == ["s-alice", "s-bob"]
    assert any("shutdown() raised RuntimeError: alice cannot close" in w
               for w in host.records["hermes_compat"].warnings)


def test_the_prompt_gets_the_last_block_while_the_object_is_busy(core_home: Path) -> None:
    """An on_session_end that extracts slowly holds the object's one thread; the next prompt's
    system_prompt_block, behind it, is answered from the object's last block within the
    deadline (Hermes asks it on another thread than its memory worker's)."""
    import threading

    from hermes_core.types import EndReason

    started, release = core_home / "end-started", core_home / "end-release"
    slow = hermes_style.RECORDER.replace(
        "    def on_session_end(self, messages):\n",
        "    def on_session_end(self, messages):\n"
        f"        import pathlib, time\n"
        f"        pathlib.Path({str(started)!r}).touch()\n"
        f"        deadline = time.monotonic() + 60\n"
        f"        while not pathlib.Path({str(release)!r}).exists() and time.monotonic() < deadline:\n"
        f"            time.sleep(0.01)\n")
    assert slow != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", slow)
    host = bridge_host(core_home, "memory:\n  providers: [hermes-recorder]\n"
                            "hooks:\n  timeouts:\n    system_prompt_block: 0.5\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        session = Session("s-1")
        assert provider.system_prompt_block(session) == "Recorder is on."
        ending = threading.Thread(target=provider.on_session_end, args=(
            session, [Message("user", "hi")], EndReason.NEW_SESSION))
        ending.start()
        waited = 0
        while not started.exists() and waited < 6000:  # the end holds the object's thread
            threading.Event().wait(0.01)
            waited += 1
        assert started.exists()
        # asked while the end still holds the thread (it waits for the release file): the
        # object's last block answers, after 80 % of the 0.5 s deadline, not after the end
        box: list[Any] = []
        asking = threading.Thread(target=lambda: box.append(provider.system_prompt_block(session)))
        asking.start()
        asking.join(30)
        assert box == ["Recorder is on."] and not release.exists()
        release.touch()
        ending.join(60)
    finally:
        release.touch()
        host.shutdown()
