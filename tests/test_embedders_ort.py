"""The local embedder's ONNX Runtime path (plugins/embedders/minilm/ort.py): the same vectors as
the numpy forward pass on varied texts (float32), int8 weights close to them, the runtime and
quantize settings refused or explained when they cannot work."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")

WORDS = ["the", "deployment", "of", "the", "billing", "service", "failed", "again", "on", "tuesday",
         "because", "the", "database", "migration", "locked", "the", "invoices", "table"]

#: ~50 texts: empty and blank, one character, punctuation, numbers, code, URLs, several scripts
#: and emoji, chat-length messages, and long ones (past 128 and 256 word pieces)
TEXTS = [
    "", " ", "\n\t", "a", "?", "...!!!", "42", "3.14159 2.71828 1.41421", "OK", "ok thanks",
    "Remind me to call Anna at 5pm tomorrow.",
    "What did we decide about the Postgres migration last week?",
    "I prefer tea over coffee, and I'm vegetarian since 2019.",
    "def f(x):\n    return x ** 2  # squares",
    "SELECT id, name FROM users WHERE created_at > now() - interval '1 day';",
    "https://example.com/path?query=1&other=two#fragment",
    "user@example.org wrote: see ticket #4521 (P1)",
    "Grüße aus Köln! Das Wetter ist schön, aber kalt.",
    "¿Dónde está la biblioteca? Está cerca de la estación.",
    "日本語のテキストです。東京は晴れています。",
    "中文文本\uff1a我们明天在北京见面。",
    "Русский текст: встреча перенесена на пятницу.",
    "نص عربي: الاجتماع يوم الخميس",
    "עברית: הפגישה נדחתה",
    "हिंदी पाठ: बैठक कल है",
    "한국어 문장입니다. 내일 만나요.",
    "Ελληνικά: η συνάντηση είναι αύριο",
    "emoji only 🙂🚀🔥👍🏽",
    "🙂",
    "mixed 日本 and English and Ελληνικά and emoji 🎉 in one line",
    "fullwidth \uff26\uff35\uff2c\uff2c \uff4c\uff45\uff54\uff54\uff45\uff52\uff53",
    "zero\u200bwidth\u200bspaces and combining e\u0301 accents",
    "tabs\tand\nnewlines\r\nand   many    spaces",
    "ALL CAPS SHOUTING ABOUT THE OUTAGE",
    "the the the the the the the the the the",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "x" * 500,
    "The assistant said the meeting moved to Thursday; the user asked to update the calendar "
    "and to notify the team in the #ops channel.",
    "Can you summarise what I told you about my sister's wedding plans in June?",
    "My flight lands at 07:45 at gate B12, terminal 2.",
    " ".join(WORDS * 2),
    " ".join(WORDS * 8),  # ~150 words: past 128 word pieces
    " ".join(WORDS * 20),  # past 256
    "word " * 300,
    "🙂 " * 200,
    "日本語" * 120,
    "- item one\n- item two\n- item three\n\n1. first\n2. second",
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null}}',
    "<html><body><p>Hello</p></body></html>",
    "C:\\Users\\anna\\Documents\\report_final_v2.docx",
    "2024-03-15T10:30:00Z",
    "+1 (555) 010-9999",
    "I don't think that's right — it's the other way round…",
    "«quoted» „text“ \u2039in\u203a 'various' \"quotes\"",
    "lol", "hmm, not sure", "yes please",
]


def _ort_missing() -> str | None:
    missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
    return f"needs {', '.join(missing)} (pip install onnxruntime onnx)" if missing else None


def _embed(texts: list[str], **config: Any) -> Any:
    import numpy as np

    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    if config.get("runtime") == "onnxruntime" and _ort_missing():
        pytest.skip(_ort_missing())
    return np.asarray(minilm.MiniLMEmbedder(minilm.MiniLMConfig(**config)).embed(texts))


@pytest.fixture(scope="module")
def numpy_vectors() -> dict[int, Any]:
    return {n: _embed(TEXTS, runtime="numpy", max_tokens=n) for n in (128, 256)}


@pytest.mark.parametrize("max_tokens", [128, 256])
def test_onnxruntime_float32_gives_numpys_vectors(numpy_vectors: dict[int, Any], max_tokens: int) -> None:
    import numpy as np

    assert len(TEXTS) >= 50
    vectors = _embed(TEXTS, runtime="onnxruntime", max_tokens=max_tokens, batch_size=7)
    reference = numpy_vectors[max_tokens]
    assert vectors.shape == reference.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * reference).sum(1)
    assert float(cosines.min()) >= 0.9999, TEXTS[int(cosines.argmin())]


def test_onnxruntime_int8_stays_close_to_numpys_vectors(numpy_vectors: dict[int, Any]) -> None:
    """int8 weights move the vectors (per-column scales; measured lowest cosine 0.976 on the
    examples' 623 chat messages, 0.958 here on "OK"). 0.94 catches a broken quantisation (one scale per
    matrix gave 0.88) without flaking on rounding; whether recall keeps is bench/recall_folds.py's
    question (docs/reference/embedders.md has its figures)."""
    import numpy as np

    vectors = _embed(TEXTS, runtime="onnxruntime", quantize=True)
    cosines = (vectors * numpy_vectors[128]).sum(1)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(cosines.min()) >= 0.94, (float(cosines.min()), TEXTS[int(cosines.argmin())])
    assert float(np.median(cosines)) >= 0.98


def test_auto_is_onnxruntime_when_installed_else_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    config = minilm.MiniLMConfig()
    assert config.runtime == "auto" and not config.quantize
    assert minilm.runtime(config) == ("numpy" if _ort_missing() else "onnxruntime")
    assert minilm.runtime(minilm.MiniLMConfig(runtime="numpy")) == "numpy"
    _hide_onnxruntime(monkeypatch)
    assert minilm.runtime(config) == "numpy"


def _hide_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))


def test_onnxruntime_asked_for_but_not_installed_names_the_package_and_the_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_core.kinds import EmbedderUnavailable

    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    _hide_onnxruntime(monkeypatch)
    e = minilm.MiniLMEmbedder(minilm.MiniLMConfig(runtime="onnxruntime"))
    with pytest.raises(EmbedderUnavailable, match=r"runtime: onnxruntime needs the package\(s\) "
                       r"onnxruntime: pip install onnxruntime onnx.*runtime: numpy"):
        e.embed(["x"])
    assert not e.loaded


@pytest.mark.parametrize(("values", "message"), [
    ({"runtime": "tensorflow"}, r"runtime\n.*Input should be 'auto', 'numpy' or 'onnxruntime'"),
    ({"runtime": "numpy", "quantize": True}, r"quantize: true needs runtime: onnxruntime"),
    ({"quantize": "maybe"}, r"quantize\n.*Input should be a valid boolean"),
    ({"runtime": "onnxruntime", "blas_threads": 0}, r"blas_threads\n.*greater than or equal to 1"),
])
def test_bad_runtime_settings_are_refused_with_the_reason(values: dict[str, Any], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        minilm.MiniLMConfig(**values)


def test_a_bad_runtime_in_config_yaml_is_named_by_config_validate(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli

    (tmp_path / "config.yaml").write_text("embedder_minilm:\n  runtime: torch\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["config", "validate"], env={"HERMES_CORE_HOME": str(tmp_path)})
    assert result.exit_code == 1
    assert "embedder_minilm.runtime" in result.output and "'onnxruntime'" in result.output


def test_int8_vectors_are_another_models_float32_ones_are_not() -> None:
    """Stores never compare vectors of two model ids: int8 weights give other vectors (a switch
    re-embeds), the float32 ONNX Runtime path gives numpy's (nothing to redo)."""
    base = minilm.MiniLMEmbedder.model_id
    assert minilm.MiniLMEmbedder(minilm.MiniLMConfig(runtime="numpy")).model_id == base
    assert minilm.MiniLMEmbedder(minilm.MiniLMConfig(runtime="onnxruntime")).model_id == base
    quantized = minilm.MiniLMEmbedder(minilm.MiniLMConfig(quantize=True))
    assert quantized.model_id == base + "+int8" != base
