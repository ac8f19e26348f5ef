"""hermes_core.semantic: the word score, cosine, the fusion of both and the vector cache."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder
from hermes_core.kinds import Embedder
from hermes_core.semantic import (
    VectorCache,
    Weights,
    fuse,
    normalise,
    query_words,
    similarities,
    text_key,
    word_scores,
)


class Axis(Embedder):
    """Text -> a unit vector on the axis of its length (mod 3)."""

    name = "axis"
    dimension = 3
    model_id = "axis-v1"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.append(list(texts))
        return [[1.0 if i == len(t) % 3 else 0.0 for i in range(3)] for t in texts]


class Short(Axis):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


def test_query_words_drop_fillers_and_fold_plurals() -> None:
    assert query_words("What are the cashews, and THE cashew?") == ["cashew"]
    assert query_words("Which of them is it?") == []
    assert query_words("glass boxes status") == ["glass", "boxe", "status"]


def test_word_scores_weigh_rare_words_and_flag_complete_matches() -> None:
    docs = ["the deploy script is in ops", "deploy on friday never", "lunch is at noon"]
    scores, complete = word_scores("deploy script", docs)
    assert complete == [True, False, False]
    assert scores[0] == pytest.approx(1.0)
    assert 0.0 < scores[1] < 0.5  # the common word alone is weak evidence
    assert scores[2] == 0.0
    assert word_scores("the of and", docs) == ([0.0] * 3, [False] * 3)
    assert word_scores("deploy", []) == ([], [])


def test_similarities_match_with_and_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    query = [3.0, 4.0, 0.0]
    vectors = [[3.0, 4.0, 0.0], [0.0, 0.0, 2.0], [-3.0, -4.0, 0.0], [0.0, 0.0, 0.0]]
    expected = [1.0, 0.0, -1.0, 0.0]
    assert similarities(query, vectors) == pytest.approx(expected, abs=1e-6)
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now raises ImportError
    assert similarities(query, vectors) == pytest.approx(expected, abs=1e-6)
    assert similarities(query, []) == []
    assert normalise([0.0, 0.0]) == [0.0, 0.0]


def test_similarities_refuse_mixed_dimensions() -> None:
    pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="2 dimensions compared with a query of 3"):
        similarities([1.0, 0.0, 0.0], [[1.0, 0.0]])


def test_fuse_keeps_an_exact_word_first_and_finds_a_paraphrase() -> None:
    words, complete = [1.0, 0.0, 0.3, 0.0], [True, False, False, False]
    meaning = [0.35, 0.6, 0.1, 0.2]
    ranked = fuse(words, complete, meaning)
    assert [r.index for r in ranked] == [0, 1, 2]  # 3: neither words nor meaning
    assert [r.via for r in ranked] == ["words+meaning", "meaning", "words"]
    assert ranked[0].score == pytest.approx(0.35 + 0.25 + 0.15)
    words_only = fuse(words, complete, None)
    assert [(r.index, r.via) for r in words_only] == [(0, "words"), (2, "words")]
    assert words_only[0].meaning is None
    strict = fuse(words, complete, meaning, Weights(floor=0.7))
    assert [r.index for r in strict] == [0, 2]


def test_cache_is_keyed_by_model_and_text() -> None:
    cache = VectorCache(max_items=3)
    cache.put("m1", "tea", [1.0, 0.0])
    assert list(cache.get("m1", "tea")) == [1.0, 0.0]
    assert cache.get("m2", "tea") is None  # another model: recompute, never mix
    assert cache.missing("m1", ["tea", "coffee", "tea"]) == ["coffee"]
    for t in ("a", "b", "c"):
        cache.put("m1", t, [0.0, 1.0])
    assert len(cache) == 3 and cache.get("m1", "tea") is None  # least recently used went
    assert cache.keep_only(["a"]) == 2 and cache.get("m1", "a") is not None
    assert text_key("\ud800 lone surrogate") != text_key("lone surrogate")


def test_cache_fill_goes_through_the_guard() -> None:
    emb = Axis()
    guarded = GuardedEmbedder(emb, timeout=30)
    cache = VectorCache()
    assert cache.fill(guarded, ["a", "bb", "a", "ccc"], batch=2) == 3
    assert emb.seen == [["a", "bb"], ["ccc"]]
    assert cache.fill(guarded, ["a", "bb"]) == 0  # nothing recomputed
    assert list(cache.get("axis-v1", "bb")) == [0.0, 0.0, 1.0]
    bad = GuardedEmbedder(Short(), timeout=30)
    with pytest.raises(EmbeddingError, match="2 dimensions; it declares 3"):
        cache.fill(bad, ["new text"])
    assert cache.get("axis-v1", "new text") is None
    guarded.close()
    bad.close()
