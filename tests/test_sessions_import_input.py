"""``sessions import`` meets hostile or broken files on both backends: a clear error naming the
line, no traceback, nothing of the refused session stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli


def _run(home: Path, url: str | None, *args: str):
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url or ""}
    return CliRunner().invoke(cli, list(args), env=env)


def _session(sid: str, **attributes: object) -> str:
    return json.dumps({"type": "session", "id": sid, "platform": "webhook", "started_at": 1.0,
                       "attributes": attributes})


def _message(sid: str, text: str) -> str:
    return json.dumps({"type": "message", "session_id": sid, "role": "user", "content": text})


@pytest.mark.parametrize(("bad_line", "message"), [
    ("[" * 100_000 + "]" * 100_000, "line 2: its JSON is nested too deeply"),
    (_session("s2", user_id="../../etc", conversation_key="k"),
     "line 2: attributes.user_id: the user key '../../etc' has a character that is not allowed"),
    (_session("s2", user_id="x" * 65), "line 2: attributes.user_id: the user key is 65 characters"),
    (json.dumps({"type": "session", "id": "s2", "attributes": ["user_id", "bob"]}),
     "line 2: 'attributes' must be an object, not list"),
])
def test_a_broken_or_hostile_line_is_refused_by_line(
    tmp_path: Path, storage_url: str | None, bad_line: str, message: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([_session("s1", user_id="alice"), bad_line,
                               _message("s2", "planted")]) + "\n", encoding="utf-8")
    result = _run(home, storage_url, "sessions", "import", str(path))
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert isinstance(result.exception, SystemExit)  # a clear error, not an escaped exception
    listed = json.loads(_run(home, storage_url, "sessions", "list", "--json").output)
    ids = [s["id"] for s in (listed["sessions"] if isinstance(listed, dict) else listed)]
    assert "s2" not in ids  # nothing of the refused session
