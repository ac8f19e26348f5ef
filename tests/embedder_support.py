"""A tiny deterministic embedder for tests of semantic ranking: it tests the plumbing, not a model.

Each text becomes the normalised counts of the topics its words belong to (``topics``: word ->
axis 0-3); a text of no topic gets an axis of its own among the last eight (by its length), so
unrelated texts are far apart, as with a real model. Subclasses set ``topics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from hermes_core.kinds import Embedder


class TopicEmbedder(Embedder):
    name = "synonyms"
    dimension = 12
    model_id = "synonyms-v1"
    topics: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for t in texts:
            v = [0.02] * 12
            for word in t.lower().replace("?", " ").replace(",", " ").replace(".", " ").split():
                if word in self.topics:
                    v[self.topics[word]] += 1.0
            if max(v) < 1.0:
                v[4 + len(t) % 8] += 1.0
            n = sum(x * x for x in v) ** 0.5
            out.append([x / n for x in v])
        return out
