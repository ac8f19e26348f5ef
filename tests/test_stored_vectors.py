"""hermes_core.storage.vectors: the one stored vector format (float16, little-endian), with and
without numpy, and what bad vectors get."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pytest

from hermes_core.semantic import similarities
from hermes_core.storage import vectors as sv


def _random(n: int, dim: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_round_trip_keeps_cosines_within_a_thousandth() -> None:
    m = _random(200, 384)
    blobs = sv.encode(m, 384)
    assert len(blobs) == 200 and {len(b) for b in blobs} == {sv.stored_size(384)} == {768}
    keep, back = sv.decode(blobs, 384)
    assert keep == list(range(200)) and back.dtype == np.float32 and back.shape == (200, 384)
    q = _random(1, 384, seed=8)[0]
    exact, stored = similarities(q, m), similarities(q, back)
    assert max(abs(a - b) for a, b in zip(exact, stored, strict=True)) < 1e-3
    assert np.argsort(exact)[-10:].tolist() == np.argsort(stored)[-10:].tolist()


def test_the_bytes_are_the_same_with_and_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [[random.Random(i).uniform(-1, 1) for _ in range(16)] for i in range(5)]
    with_numpy = sv.encode(rows, 16)
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now raises ImportError
    plain = sv.encode(rows, 16)
    assert plain == with_numpy
    keep, back = sv.decode([*plain, b"short"], 16)
    assert keep == [0, 1, 2, 3, 4] and isinstance(back[0], tuple)
    assert all(math.isclose(a, b, abs_tol=1e-3) for a, b in zip(back[2], rows[2], strict=True))
    with pytest.raises(ValueError, match="vector 1 has 3 dimensions; each must have 16"):
        sv.encode([rows[0], [1.0, 2.0, 3.0]], 16)


def test_float32_rows_are_read_only_when_asked() -> None:
    m = _random(3, 8)
    legacy = [row.astype("<f4").tobytes() for row in m]  # 32 bytes: also a 16-dim float16 row
    assert sv.decode(legacy, 8)[0] == []  # by size alone it could be another model's
    keep, back = sv.decode([legacy[0], None, sv.encode(m[1:2], 8)[0]], 8, legacy=True)
    assert keep == [0, 2]
    assert np.allclose(back[0], m[0]) and np.allclose(back[1], m[1], atol=1e-3)


def test_bad_vectors_are_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"shape \(2, 3\) given; each must have 4 dimensions"):
        sv.encode([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], 4)
    with pytest.raises(ValueError, match="vector 1 holds NaN or an infinite value"):
        sv.encode([[1.0, 0.0], [math.nan, 1.0]], 2)
    with pytest.raises(ValueError, match="vector 0 holds NaN"):
        sv.encode([[math.inf, 0.0]], 2)
    assert sv.encode([], 4) == []
    assert sv.decode([], 4)[0] == []
