"""A turn never waits for background embedding or for a model load.

Background embedding (the archive's indexer, the file memory's entry vectors, a query vector
prepared ahead, the model's load) runs on the guarded embedder's background lane, each slice only
while no turn is in flight; a query embedded during a turn runs on its own lane, and one that
would have to load the model first goes on by words and says so.

The embedders are throwaway ones defined here (a synonym table, no model), registered inline
through ``register_embedders``; the one of the agent test blocks every call on texts it was not
told to let through, until the test releases it. The agent, the file memory, the archive and its
indexer are the real ones; only the model's words are canned (CannedLLM).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from embedder_support import TopicEmbedder

from hermes_core import embeddings, hookimpl
from hermes_core.agent import Agent
from hermes_core.embeddings import EmbedderLoading, GuardedEmbedder
from hermes_core.host import PluginHost
from hermes_core.results import TurnResult
from hermes_core.testing import CannedLLM

DEADLINE = 60.0
TOPICS = {"dog": 0, "whippet": 0, "pet": 0, "animal": 0, "rent": 1, "landlord": 1}


class Held(TopicEmbedder):
    """Once :attr:`hold` is set, every call on a text outside :attr:`free` blocks until
    :attr:`release` is set (like a model busy with a long batch)."""

    name = "held"
    model_id = "held-v1"
    topics = TOPICS
    hold = threading.Event()
    release = threading.Event()
    blocked = threading.Event()
    inside = 0  # calls blocked right now
    free: ClassVar[set[str]] = set()

    def __init__(self, config: Any = None, context: Any = None) -> None:
        super().__init__()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if Held.hold.is_set() and any(t not in Held.free for t in texts):
            Held.inside += 1
            Held.blocked.set()
            try:
                if not Held.release.wait(DEADLINE):
                    raise RuntimeError("the test never released the embedder")
            finally:
                Held.inside -= 1
        return super().embed(texts)


class HeldPlugin:
    @hookimpl
    def register_embedders(self, register):  # type: ignore[no-untyped-def]
        register(Held)


def vectors(home: Path) -> tuple[int, int]:
    con = sqlite3.connect(home / "state.db")
    try:
        return (con.execute("SELECT count(*) FROM message_vectors").fetchone()[0],
                con.execute("SELECT count(*) FROM messages WHERE role IN ('user', 'assistant')"
                            ).fetchone()[0])
    finally:
        con.close()


def turn_in_thread(agent: Agent, text: str) -> TurnResult:
    out: list[TurnResult] = []
    thread = threading.Thread(target=lambda: out.append(agent.run_turn(text)), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert out, f"the turn {text!r} did not complete while background embedding was blocked"
    return out[0]


def test_a_turn_completes_while_background_embedding_is_blocked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        "embeddings:\n  embedder: held\n  timeout: 60\n"
        "file_memory:\n  recall_timeout: 10\n", encoding="utf-8")
    for event in (Held.hold, Held.release, Held.blocked):
        event.clear()
    Held.free = set()
    host = PluginHost.load(home, entry_points=False, plugins=[("heldplugin", HeldPlugin())])
    agent = Agent.create(host, CannedLLM("Noted."))
    fm = host.instances["memory-provider:file_memory"]
    archive = host.instances["memory-provider:session_archive"]
    fm.store.add("memory", "We adopted a whippet called Pepper from the shelter")
    try:
        agent.run_turn("Good morning")
        fm.recall.settle(DEADLINE)  # the entry's vector, once the turn is over
        assert archive.settle(DEADLINE)
        assert vectors(home) == (2, 2)  # the turn's two messages got theirs

        # from now on the embedder blocks on anything but the two questions
        Held.free = {"Which animal lives with us?", "Which pet lives with us?"}
        Held.hold.set()
        fm.store.add("memory", "The landlord raises the rent to 1,450 from October")
        first = turn_in_thread(agent, "Which animal lives with us?")
        # the question was embedded at once (its own lane), the new entry is left for later
        assert "whippet" in first.recall_block, first.recall_block
        # once the turn is over, background embedding starts, and blocks in the embedder
        assert Held.blocked.wait(DEADLINE), "no background embedding started after the turn"
        second = turn_in_thread(agent, "Which pet lives with us?")
        assert "whippet" in second.recall_block, second.recall_block
        assert Held.inside >= 1 and not Held.release.is_set()  # still blocked meanwhile
        assert vectors(home)[0] < vectors(home)[1]  # the new messages wait for their vectors
    finally:
        Held.release.set()
    try:
        # released: the background work goes on, nothing skipped
        assert archive.settle(DEADLINE)
        got, want = vectors(home)
        assert got == want
        fm.recall.settle(DEADLINE)
        emb = fm.recall.embedder()
        assert fm.recall.cache.get(emb.model_id, "The landlord raises the rent to 1,450 from "
                                                 "October") is not None
    finally:
        agent.close()


class Lazy(TopicEmbedder):
    """A model that is not in memory until its first call."""

    name = "lazy"
    model_id = "lazy-v1"
    topics = TOPICS

    #: the load blocks until this is set
    release: threading.Event | None = None

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[int] = []  # turns_running() seen by each load as it began
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self._loaded:
            self.loads.append(embeddings.turns_running())
            if self.release is not None and not self.release.wait(DEADLINE):
                raise RuntimeError("the test never let the model load")
            self._loaded = True
        return super().embed(texts)


def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.01)


def test_a_query_during_a_turn_never_loads_the_model_and_has_it_loaded_after() -> None:
    lazy = Lazy()
    g = GuardedEmbedder(lazy, timeout=30)
    try:
        with embeddings.turn_in_flight():
            with pytest.raises(EmbedderLoading, match="word search meanwhile"):
                g.embed(["Which animal lives with us?"])
            assert not g.loaded and lazy.calls == 0  # not loaded on the turn's path
            assert g.ready() and g.problem is None  # loading is no failure: nothing paused
        wait_for(lambda: g.loaded, "the model was not loaded once the turn was over")
        assert lazy.loads == [0]  # loaded while no turn was in flight
        with embeddings.turn_in_flight():
            assert len(g.embed(["Which pet lives with us?"])) == 1  # loaded: queries go on
    finally:
        g.close()


def test_outside_a_turn_a_query_loads_the_model_itself() -> None:
    lazy = Lazy()
    g = GuardedEmbedder(lazy, timeout=30)
    try:
        assert len(g.embed(["a command's search"])) == 1
        assert g.loaded and lazy.loads == [0]
    finally:
        g.close()


def test_a_background_call_does_not_start_while_turns_keep_running() -> None:
    lazy = Lazy()
    g = GuardedEmbedder(lazy, timeout=0.5)  # the deadline does not count the waiting
    try:
        turn = embeddings.turn_in_flight()
        turn.__enter__()
        try:
            wait = g.start(["a message to index"], background=True)
            # the lane waits for the turn: several of its polls pass without a slice
            for _ in range(3):
                assert not embeddings._TURNS.wait_quiet(embeddings._STOP_POLL)
            assert lazy.calls == 0 and not g.loaded
        finally:
            turn.__exit__(None, None, None)
        assert len(wait()) == 1  # then it runs, well within its own deadline
        assert g.problem is None and g.ready()
    finally:
        g.close()


class LazyPlugin:
    """Registers :class:`LazyModel` (a class-level record of its loads, for the agent test)."""

    @hookimpl
    def register_embedders(self, register):  # type: ignore[no-untyped-def]
        register(LazyModel)


class LazyModel(Lazy):
    name = "lazymodel"
    model_id = "lazymodel-v1"
    instances: ClassVar[list[LazyModel]] = []
    release = threading.Event()

    def __init__(self, config: Any = None, context: Any = None) -> None:
        super().__init__()
        LazyModel.instances.append(self)


def test_a_search_in_a_turn_goes_on_by_words_until_the_model_is_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from hermes_core.types import ToolContext

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    (home / "config.yaml").write_text(
        "memory:\n  providers: [session_archive]\nembeddings:\n  embedder: lazymodel\n",
        encoding="utf-8")
    LazyModel.instances.clear()
    LazyModel.release.clear()
    host = PluginHost.load(home, entry_points=False, plugins=[("lazyplugin", LazyPlugin())])
    agent = Agent.create(host, CannedLLM("Noted: the whippet sleeps on the sofa."))
    archive = host.instances["memory-provider:session_archive"]
    (tool,) = archive.get_tools()

    def search(query: str) -> dict[str, Any]:
        with embeddings.turn_in_flight():  # as the model's tool call inside a turn
            return dict(json.loads(tool.invoke({"query": query}, ToolContext())))

    try:
        agent.run_turn("Where does the whippet sleep?")
        agent.new_session()
        # the model's load (once turns pause) is held back: the search finds by words and says
        # why meaning takes no part (the set-up has not run yet, or the model is loading)
        first = search("whippet sofa")
        assert "sofa" in json.dumps(first["results"]), first
        assert "starting" in first["semantic"] or "warming up" in first["semantic"], first
        LazyModel.release.set()
        # once turns pause, the set-up, the model's load and the indexing happen
        assert archive.settle(DEADLINE)
        assert [m.loads for m in LazyModel.instances if m.loads] == [[0]]  # outside any turn
        second = search("whippet sofa")
        assert second["semantic"] == "on", second
    finally:
        LazyModel.release.set()
        agent.close()
