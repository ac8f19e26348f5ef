"""A home for the inspector's tests: the first-week replay planted in place, two users' memories
and sessions (``memory.scope: user``), a loaded host with the inspector over it.

The replay's words come from the transcript (no model is called); everything else is real: the
stores on SQLite files or the test PostgreSQL server, the archive, the HTTP server.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.types import EndReason, Message, Session, SwitchReason

ROOT = Path(__file__).resolve().parent.parent
FIRST_WEEK = ROOT / "examples" / "first-week.jsonl"
USERS = ("alice", "bob")


def run(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def eval_question(qid: str, group: str, recall: float, tokens: int) -> dict[str, Any]:
    """One question record as ``run_eval`` makes it (its figures chosen by the test)."""
    scores = {f"{metric}@{k}": recall for k in (1, 3) for metric in ("recall", "hit", "ndcg")}
    return {"id": qid, "group": group, "ok": True, "failure": None, "tokens": tokens,
            "retrieval_ms": 1.0, "scores": {**scores, "found_at": {"s1": 1}, "by_text": []},
            "sources": [{"source": "session_archive", "status": "ok", "tokens": tokens,
                         "ms": 1.0, "scores": scores}]}


def plant_eval(home: Path) -> None:
    """Two eval reports built by the eval's own report builder, and one file that is not one."""
    from hermes_core.plugins.eval.report import build_report

    folder = home / "eval"
    folder.mkdir(exist_ok=True)
    runs = {"words-only.json": [("q1", "single-session", 0.5, 120), ("q2", "temporal", 0.0, 80)],
            "hybrid.json": [("q1", "single-session", 1.0, 150), ("q2", "temporal", 0.5, 90)]}
    for name, questions in runs.items():
        run_data = {"questions": [eval_question(*q) for q in questions], "ingest": {},
                    "seconds": 1.0}
        report = build_report(run_data, dataset="tiny.json", fmt="longmemeval",
                              providers=["session_archive"], engine="compressor", ks=[1, 3],
                              answered=False)
        (folder / name).write_text(json.dumps(report), encoding="utf-8")
    (folder / "notes.json").write_text('{"not": "a report"}', encoding="utf-8")
    for age, name in enumerate(("hybrid.json", "words-only.json", "notes.json")):  # hybrid newest
        os.utime(folder / name, (1_800_000_000 - age * 60, 1_800_000_000 - age * 60))


def plant(home: Path) -> None:
    """Config (user scope), the replay, one memory entry and one session per user, two eval
    reports."""
    plant_eval(home)
    # the local embedder's deadline is raised: on a loaded machine its default 10 s pauses it and
    # the archive's search goes word-only, which is not what these tests look at
    (home / "config.yaml").write_text("memory:\n  scope: user\nembeddings:\n  timeout: 300\n",
                                      encoding="utf-8")
    run("replay", "--in-place", str(FIRST_WEEK))
    for user in USERS:
        run("memory", "add", "--user", user, "--target", "memory",
            f"{user.title()} keeps bees on a rooftop in Porto")
    from hermes_core.commands import load_host

    host = load_host()
    try:
        host.activate_memory_providers()
        for user in USERS:
            session = Session(id=f"s-{user}", platform="inspect-test",
                              attributes={"user_id": user})
            host.hooks.on_session_switch(new_session=session, old_session=None,
                                         reason=SwitchReason.NEW)
            host.hooks.on_message(message=Message("user", f"{user}: my beehive count is 12"),
                                  session=session)
            host.hooks.on_message(message=Message("assistant", "Noted, twelve hives."),
                                  session=session)
            host.hooks.on_session_end(session=session, messages=[], reason=EndReason.USER_EXIT)
        # a subagent alice's session delegated to: a child with its parent link
        child = Session(id="s-alice-research", platform="inspect-test", parent_session_id="s-alice",
                        attributes={"user_id": "alice", "agent_context": "subagent"})
        host.hooks.on_session_switch(new_session=child, old_session=None,
                                     reason=SwitchReason.DELEGATION)
        for role, text in (("user", "Which flowers suit a rooftop apiary?"),
                           ("assistant", "Lavender, borage and thyme.")):
            host.hooks.on_message(message=Message(role, text), session=child)
        host.hooks.on_session_end(session=child, messages=[], reason=EndReason.DELEGATED)
    finally:
        host.shutdown()


def copy_home(src: Path, dst: Path) -> None:
    """Copy a planted home: files as they are, each SQLite database through SQLite's backup
    (a consistent snapshot even while a thread the host's bounded shutdown left behind still
    holds it; its ``-wal``/``-shm`` files may vanish while a plain copy reads the folder)."""
    sidecars = ("-wal", "-shm", "-journal")
    shutil.copytree(src, dst, ignore=lambda _dir, names: [
        n for n in names if n.endswith(".db") or n.endswith(sidecars)])
    for db in src.rglob("*.db"):
        target = dst / db.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(target)) as copy:
            source.backup(copy)


@dataclass
class Stack:
    inspector: Any
    gate: Any
    app: Any
    token: str
    user_tokens: dict[str, str]

    def auth(self, user: str | None = None) -> dict[str, str]:
        value = self.token if user is None else self.user_tokens[user]
        return {"Authorization": f"Bearer {value}"}


@contextmanager
def open_stack(home: Path) -> Iterator[Stack]:
    from hermes_core.bearer import resolve
    from hermes_core.commands import load_host
    from hermes_core.plugins.inspect.api import build_app
    from hermes_core.plugins.inspect.auth import Gate, issue_user_token
    from hermes_core.plugins.inspect.service import Inspector

    host = load_host()
    host.activate_memory_providers()
    credential, token = resolve(home, "HERMES_CORE_MCP_TOKEN")
    assert token is not None
    inspector = Inspector(host)
    gate = Gate(credential, home)
    tokens = {user: issue_user_token(home, user) for user in USERS}
    try:
        yield Stack(inspector, gate, build_app(inspector, gate), token, tokens)
    finally:
        inspector.close()
        host.shutdown()


def memory_text(home: Path, storage_url: str | None) -> str:
    """MEMORY.md + USER.md of the shared memory as stored (files, or the database via the CLI)."""
    if storage_url is None:
        return "".join((home / "memories" / f).read_text(encoding="utf-8")
                       for f in ("MEMORY.md", "USER.md") if (home / "memories" / f).exists())
    shown = json.loads(run("memory", "show", "--json").output)
    return json.dumps(shown)
