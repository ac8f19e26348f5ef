"""``mcp serve`` over an archive that gets its vectors in the background (filled before an
embedder was installed): a served call is a turn to the indexer, so the indexer's embedding waits
between slices while calls are served, and a search never waits for the indexer's slice.

The embedder is a throwaway one defined here (no model: one vector for all), gated by events so the
test decides when the indexer's slice may finish; the archive, the indexer and the server's stack
are the real ones."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from hermes_core import embeddings, hookimpl
from hermes_core.agent import Agent
from hermes_core.host import PluginHost
from hermes_core.kinds import Embedder
from hermes_core.testing import CannedLLM

DEADLINE = 60.0


class Gated(Embedder):
    """One vector for every text; the indexer's slices block until :attr:`release` is set."""

    name = "gated"
    dimension = 4
    model_id = "gated-v1"
    release = threading.Event()
    slice_started = threading.Event()
    #: turns_running() seen by each query embedding (it runs inside the served call)
    turns_seen: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if threading.current_thread().name.endswith("-background"):
            Gated.slice_started.set()
            if not Gated.release.wait(DEADLINE):
                raise RuntimeError("the test never released the slice")
        else:
            Gated.turns_seen.append(embeddings.turns_running())
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]  # one direction: every message is near


class GatedPlugin:
    @hookimpl
    def register_embedders(self, register):  # type: ignore[no-untyped-def]
        register(Gated)


def config(home: Path, embedder: str) -> None:
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        f"embeddings:\n  embedder: {embedder}\n", encoding="utf-8")


def vectors(home: Path) -> tuple[int, int]:
    con = sqlite3.connect(home / "state.db")
    try:
        return (con.execute("SELECT count(*) FROM message_vectors").fetchone()[0],
                con.execute("SELECT count(*) FROM messages").fetchone()[0])
    finally:
        con.close()


def test_a_search_served_during_backfill_is_a_turn_and_never_waits_for_the_slice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_core.plugins.mcp.commands import activate_served_providers
    from hermes_core.plugins.mcp.server import StackServer

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    config(home, "none")  # filled before any embedder: no vectors
    host = PluginHost.load(home, entry_points=False)
    agent = Agent.create(host, CannedLLM("Noted."))
    for i in range(6):
        agent.run_turn(f"the staging database migration, step {i}")
    agent.close()
    host.shutdown()
    assert vectors(home) == (0, 12)

    Gated.release.clear()
    Gated.slice_started.clear()
    Gated.turns_seen.clear()
    config(home, "gated")
    host = PluginHost.load(home, entry_points=False, plugins=[("gatedplugin", GatedPlugin())])
    activate_served_providers(host)
    stack = StackServer(host, transport="stdio")
    try:
        archive = host.instances["memory-provider:session_archive"]
        archive.semantic()  # the embedder and the indexer start; it finds 12 messages to embed
        assert Gated.slice_started.wait(DEADLINE), "the indexer never started its backfill"
        # the indexer's slice is blocked inside the embedder: the search answers anyway
        answer = stack.serve("stdio", "client", "session_search", {"query": "staging migration"})
        assert not answer.is_error, answer.text
        assert "staging database migration" in answer.text
        assert not Gated.release.is_set() and vectors(home)[0] == 0
        # the query was embedded inside the served call, which counted as a turn in flight:
        # what makes the indexer wait between its slices while calls are being served
        assert Gated.turns_seen == [1]
        assert embeddings.turns_running() == 0
    finally:
        Gated.release.set()
    try:
        assert archive.settle(DEADLINE)
        assert vectors(home) == (12, 12)  # the backfill went on once released: nothing skipped
    finally:
        stack.close()
        host.shutdown()
