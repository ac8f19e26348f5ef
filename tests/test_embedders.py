"""The embedder kind: registration, selection (auto / none / a name), the guard around calls
(raising, hanging, wrong dimension), and the local all-MiniLM-L6-v2 embedder checked against
vectors computed by sentence-transformers with torch (tests/data/minilm_reference.json)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from hermes_core import PluginHost, hookimpl
from hermes_core.config import CoreConfig
from hermes_core.embeddings import EmbeddingError, GuardedEmbedder, select_embedder
from hermes_core.errors import UnknownNameError
from hermes_core.kinds import Embedder, EmbedderUnavailable

DATA = Path(__file__).parent / "data" / "minilm_reference.json"


class Toy(Embedder):
    """Letters a-d counted: enough to tell texts apart, no model."""

    name = "toy"
    dimension = 4
    model_id = "toy-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            v = [float(t.count(c)) + 0.01 for c in "abcd"]
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out


class ToyPlugin:
    @hookimpl
    def register_embedders(self, register):
        register(Toy)


def load(home: Path) -> PluginHost:
    return PluginHost.load(home, builtins=True, entry_points=False, directories=False,
                           plugins=[("toyplugin", ToyPlugin())])


def core(embedder: str) -> CoreConfig:
    return CoreConfig.model_validate({"embeddings": {"embedder": embedder, "timeout": 5}})


def test_hook_register_embedders(home: Path) -> None:
    host = load(home)
    assert {"minilm", "toy"} <= set(host.registries.embedders.names())
    assert "embedder:toy" in host.records["toyplugin"].registers


def test_select_by_name_none_and_unknown(home: Path) -> None:
    host = load(home)
    guarded, why = select_embedder(host.registries, core("toy"), home)
    assert guarded is not None and guarded.model_id == "toy-v1" and "toy" in why
    assert len(guarded.embed(["abc", "d"])) == 2
    off, why = select_embedder(host.registries, core("none"), home)
    assert off is None and "embeddings.embedder: none" in why
    with pytest.raises(UnknownNameError, match=r"embeddings\.embedder.*toy"):
        select_embedder(host.registries, core("nosuch"), home)


def test_auto_without_the_local_embedder_is_word_search_with_a_reason(home: Path) -> None:
    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("toyplugin", ToyPlugin())])
    guarded, why = select_embedder(host.registries, core("auto"), home)
    assert guarded is None and "pip install 'hermes-core-kernel[embeddings]'" in why


def test_a_named_embedder_that_cannot_run_names_the_fix(home: Path) -> None:
    class Missing(Toy):
        name = "missing"

        @classmethod
        def unavailable(cls) -> str | None:
            return "package foo is missing: pip install foo"

    class P:
        @hookimpl
        def register_embedders(self, register):
            register(Missing)

    host = PluginHost.load(home, builtins=False, entry_points=False, directories=False,
                           plugins=[("p", P())])
    with pytest.raises(EmbedderUnavailable, match="pip install foo"):
        select_embedder(host.registries, core("missing"), home)


def test_an_embedder_plugin_that_raises_at_start_is_unavailable_with_why(home: Path) -> None:
    """A constructor or unavailable() that raises, or an invalid config section: a clear
    EmbedderUnavailable (the host then warns and searches by words; doctor and `sessions
    reindex` print it), never the plugin's exception (which gave `doctor` a traceback)."""
    class InitBoom(Toy):
        name = "initboom"

        def __init__(self, *a: object) -> None:
            raise RuntimeError("cannot construct")

    class ProbeBoom(Toy):
        name = "probeboom"

        @classmethod
        def unavailable(cls) -> str | None:
            raise RuntimeError("probe exploded")

    class P:
        @hookimpl
        def register_embedders(self, register):
            register(InitBoom)
            register(ProbeBoom)

    host = PluginHost.load(home, builtins=True, entry_points=False, directories=False,
                           plugins=[("p", P())])
    with pytest.raises(EmbedderUnavailable, match=r"'initboom' \(plugin 'p'\) failed to start: "
                                                  r"RuntimeError: cannot construct"):
        select_embedder(host.registries, core("initboom"), home)
    with pytest.raises(EmbedderUnavailable, match=r"unavailable\(\) raised RuntimeError: probe"):
        select_embedder(host.registries, core("probeboom"), home)
    if not minilm_installed():
        return
    with pytest.raises(EmbedderUnavailable, match=r"'embedder_minilm' section.*batch_size"):
        select_embedder(host.registries, core("minilm"), home,
                        {"embedder_minilm": {"batch_size": 0}})


def minilm_installed() -> bool:
    try:
        from hermes_core.plugins.embedders.minilm import MiniLMEmbedder
    except ImportError:
        return False
    return MiniLMEmbedder.unavailable() is None


class Raising(Toy):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("boom")


class Hanging(Toy):
    def __init__(self, *a: object) -> None:
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.release.wait(30)
        return super().embed(texts)


class WrongDim(Toy):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


def test_guard_turns_a_raising_embedder_into_a_clear_pause() -> None:
    g = GuardedEmbedder(Raising(None, None), pause=3600)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match=r"raised RuntimeError: boom.*word search still works"):
        g.embed(["a"])
    assert not g.ready() and "boom" in (g.problem or "")
    with pytest.raises(EmbeddingError, match="boom"):  # paused: fails fast, same reason
        g.embed(["a"])


class Leaking(Toy):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("401 from https://api.example/embed?x=1 with "
                           "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 " + "detail " * 30_000)


def test_guard_keeps_an_embedders_error_short_and_without_its_key() -> None:
    """The problem text reaches the log, doctor and session_search's result (the model, the
    archive): a credential in the embedder's exception is redacted, 200 kB are cut short."""
    g = GuardedEmbedder(Leaking(None, None), pause=3600)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError) as caught:
        g.embed(["a"])
    problem = g.problem or ""
    assert "401 from" in problem and "word search still works" in problem
    assert "sk-ant-api03" not in problem and "sk-ant-api03" not in str(caught.value)
    assert len(problem) < 1_000


def test_guard_bounds_a_hanging_embedder() -> None:
    hanging = Hanging()
    g = GuardedEmbedder(hanging, timeout=0.2, pause=0)
    try:
        with pytest.raises(EmbeddingError, match=r"did not answer within 0\.2 s"):
            g.embed(["a"])
        with pytest.raises(EmbeddingError, match="still busy"):
            g.embed(["b"])
    finally:
        hanging.release.set()
        g.close()


def test_guard_refuses_vectors_of_the_wrong_dimension() -> None:
    g = GuardedEmbedder(WrongDim(None, None))  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match="2 dimensions; it declares 4"):
        g.embed(["a"])


class Returns(Toy):
    """Returns whatever ``answer(texts)`` gives: a third-party embedder's bad output."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.answer(texts)  # type: ignore[operator, no-any-return]


@pytest.mark.parametrize("answer,message", [
    (lambda texts: None, "returned NoneType instead of a list of vectors"),
    (lambda texts: ["abcd" for _ in texts], "not numbers"),
    (lambda texts: [[float("nan"), 0.0, 0.0, 1.0] for _ in texts], "NaN or infinite"),
    (lambda texts: [[float("inf"), 0.0, 0.0, 1.0] for _ in texts], "NaN or infinite"),
    (lambda texts: [[1.0, 0.0, 0.0, 0.0]] * (len(texts) + 1), "2 vectors for 1 texts"),
    (lambda texts: [7 for _ in texts], "a vector of type int"),
])
def test_guard_refuses_output_that_is_not_vectors_and_pauses(answer: object, message: str) -> None:
    """Not only the wrong dimension: None, strings, NaN, the wrong count are an EmbeddingError
    that pauses semantic search (an indexer then waits instead of calling again at once), never
    a TypeError or a NaN that reaches the ranking."""
    g = GuardedEmbedder(Returns(answer), pause=3600)  # type: ignore[arg-type]
    try:
        with pytest.raises(EmbeddingError, match=message):
            g.embed(["a"])
        assert not g.ready() and message.split()[0] in (g.problem or "")
    finally:
        g.close()


def test_a_call_queued_at_close_says_so() -> None:
    """A call still queued when the embedder is closed (shutdown) fails with a clear message,
    not "raised CancelledError", and does not pause semantic search."""
    hanging = Hanging()
    g = GuardedEmbedder(hanging, timeout=30)
    try:
        g.start(["a"], background=True)  # running, holds the lane
        queued = g.start(["b"], background=True)
        g.close()
        with pytest.raises(EmbeddingError, match="was closed before this call ran"):
            queued()
        with pytest.raises(EmbeddingError, match="is closed"):  # a call after close
            g.embed(["c"])
        assert g.ready() and g.problem is None
    finally:
        hanging.release.set()


def test_a_command_exits_after_its_embedder_hung(home: Path) -> None:
    """A hanging third-party embedder: `sessions reindex` reports the deadline and the process
    ends (the hung call's thread does not keep the interpreter from exiting)."""
    import os
    import subprocess
    import sys
    import textwrap

    plugin = home / "plugins" / "hangs"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(textwrap.dedent("""
        import threading
        from hermes_core import hookimpl
        from hermes_core.kinds import Embedder

        class Hangs(Embedder):
            name = "hangs"
            dimension = 4
            model_id = "hangs-v1"

            def embed(self, texts):
                threading.Event().wait()  # never returns

        @hookimpl
        def register_embedders(register):
            register(Hangs)
    """), encoding="utf-8")
    (home / "config.yaml").write_text("embeddings:\n  embedder: hangs\n  timeout: 0.5\n",
                                      encoding="utf-8")
    from hermes_core.plugins.memory.session_archive import SessionArchive
    from hermes_core.types import Message

    with SessionArchive(home / "state.db") as a:
        a.append_messages("s1", [Message("user", "we adopted a whippet")])
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    try:
        done = subprocess.run([sys.executable, "-m", "hermes_core", "sessions", "reindex"],
                              env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("`sessions reindex` did not exit after its embedder missed its deadline")
    assert done.returncode == 1
    assert "did not answer within 0.5 s" in done.stderr and "run the command again" in done.stderr
    assert "embeddings.timeout" in done.stderr  # which setting to raise on a busy machine
    with SessionArchive(home / "state.db") as a:
        assert a.count_messages() == 1


# ---------------------------------------------------------------------------- the local model

minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")


def _local(runtime: str = "auto") -> Embedder:
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    if runtime == "onnxruntime":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnx")
    # 256 word pieces: sentence-transformers' own setting, so the vectors must match exactly
    return minilm.MiniLMEmbedder(minilm.MiniLMConfig(batch_size=3, max_tokens=256, runtime=runtime))


@pytest.mark.parametrize("runtime", ["numpy", "onnxruntime"])
def test_minilm_matches_sentence_transformers(runtime: str) -> None:
    np = pytest.importorskip("numpy")
    ref = json.loads(DATA.read_text())
    vectors = np.asarray(_local(runtime).embed(ref["texts"]))
    expected = np.asarray(ref["vectors"], dtype=np.float32)
    assert vectors.shape == expected.shape == (len(ref["texts"]), 384)
    assert float(np.abs(vectors - expected).max()) < 1e-6
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_minilm_loads_once_across_threads() -> None:
    np = pytest.importorskip("numpy")
    e = _local()
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(e.embed(["same text"])))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 4
    assert all(np.allclose(r, results[0]) for r in results)  # type: ignore[arg-type]


def test_minilm_missing_or_corrupt_model_names_the_fix(tmp_path: Path) -> None:
    e = minilm.MiniLMEmbedder(minilm.MiniLMConfig(model_path=str(tmp_path)))
    with pytest.raises(EmbedderUnavailable, match=r"lacks config\.json.*reinstall"):
        e.embed(["x"])
    if minilm.MiniLMEmbedder.unavailable():
        return
    source = minilm.model_folder(minilm.MiniLMConfig())
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    (tmp_path / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    e = minilm.MiniLMEmbedder(minilm.MiniLMConfig(model_path=str(tmp_path)))
    with pytest.raises(EmbedderUnavailable, match="corrupt"):
        e.embed(["x"])


def test_an_unknown_embedder_name_is_named_by_config_validate(tmp_path):
    from click.testing import CliRunner

    from hermes_core.cli import cli

    (tmp_path / "config.yaml").write_text("embeddings:\n  embedder: minilmm\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["config", "validate"], env={"HERMES_CORE_HOME": str(tmp_path)})
    assert result.exit_code == 1
    assert "line 2: embeddings.embedder: unknown embedder 'minilmm'" in result.output
    (tmp_path / "config.yaml").write_text("embeddings:\n  embedder: none\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["config", "validate"], env={"HERMES_CORE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------------------- yielding to turns

class Recording(Toy):
    """Toy that records each call's texts (in the order the calls ran)."""

    def __init__(self) -> None:
        super().__init__(None, None)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_a_background_call_waits_for_the_turn_and_a_query_does_not() -> None:
    from hermes_core import embeddings

    toy = Recording()
    g = GuardedEmbedder(toy, timeout=30)
    texts = [f"text {'a' * i}" for i in range(20)]
    try:
        with embeddings.turn_in_flight():
            wait = g.start(texts, background=True)
            assert len(g.embed(["the query"])) == 1
            # the query ran; the batch did not (its lane waits for the turn to end)
            assert toy.calls == [["the query"]]
        vectors = wait()
        assert [list(v) for v in vectors] == Toy(None, None).embed(texts)  # in order, whatever the slices
        batch_calls = toy.calls[1:]
        assert len(batch_calls) == 3 and all(len(c) <= embeddings.BACKGROUND_SLICE
                                             for c in batch_calls)
        assert g.problem is None
    finally:
        g.close()


def test_a_stopped_background_call_ends_between_slices_without_pausing_the_embedder() -> None:
    from hermes_core import embeddings

    toy = Recording()
    g = GuardedEmbedder(toy, timeout=30)
    stop = threading.Event()
    try:
        with embeddings.turn_in_flight():
            wait = g.start(["a", "b"], background=True, stop=stop)
            stop.set()
        with pytest.raises(EmbeddingError, match="stopped"):
            wait()
        assert toy.calls == [] and g.ready() and g.problem is None
        assert len(g.embed(["c"], background=True)) == 1
    finally:
        g.close()
