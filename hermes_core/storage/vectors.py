"""The one way a store keeps an embedding in a table: little-endian float16 bytes.

Every built-in store that keeps vectors beside its rows (the session archive's messages and
derived facts, the lossless engine's archived messages) writes them with :func:`encode` and
reads them with :func:`decode`, on SQLite (``BLOB``) and PostgreSQL (``BYTEA``) alike: 2 bytes
per dimension (768 bytes for MiniLM's 384), whose rounding moves a cosine by less than 0.001, so
a ranking is the one the float32 vectors give. A vector is stored with the model id that made
it, in the row or in the store's metadata; vectors of two models are never compared.

:func:`decode` also reads, when asked (``legacy``), the float32 rows (4 bytes per dimension)
the lossless engine wrote before this format was shared, so no store needs a migration to read
what it has; a row of any other length is another model's (or damaged) and is left out, never
an error.

Every such table has one shape: a row per item (a message), keyed by the item's id, holding
``model`` (the embedder's model id), ``text_hash`` (:func:`hermes_core.semantic.text_key` of the
text embedded) and ``vec``; both backends write it with :func:`upsert_sql`'s statement. A row of
another model is never compared with the current one's.

numpy is used when installed (every embedder that runs locally brings it); without it (an API
embedder) the same bytes are read and written with :mod:`struct`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["BYTES_PER_DIMENSION", "decode", "encode", "stored_size", "upsert_sql"]

#: what :func:`encode` writes per dimension
BYTES_PER_DIMENSION = 2
_LEGACY = 4  # float32: the lossless engine's rows before 0.2


def stored_size(dimension: int) -> int:
    """Bytes of one encoded vector of ``dimension`` dimensions."""
    return BYTES_PER_DIMENSION * dimension


def encode(vectors: Any, dimension: int) -> list[bytes]:
    """Each of ``vectors`` (a matrix, or a sequence of sequences of floats) as float16 bytes.

    Raises ``ValueError`` naming the row when one has another dimension or holds NaN or an
    infinity (an embedder's fault: nothing of the batch is stored, the caller keeps its cursor).
    """
    try:
        import numpy as np
    except ImportError:
        return [_encode_plain(row, dimension, i) for i, row in enumerate(vectors)]
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.size == 0:
        return []
    if matrix.ndim != 2 or matrix.shape[1] != dimension:
        raise ValueError(f"vectors of shape {tuple(matrix.shape)} given; each must have "
                         f"{dimension} dimensions (the embedder's declared dimension)")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise ValueError(f"vector {int(np.argmin(finite))} holds NaN or an infinite value")
    packed = matrix.astype("<f2")
    return [packed[i].tobytes() for i in range(len(packed))]


def _encode_plain(row: Sequence[float], dimension: int, index: int) -> bytes:
    values = [float(x) for x in row]
    if len(values) != dimension:
        raise ValueError(f"vector {index} has {len(values)} dimensions; each must have "
                         f"{dimension} (the embedder's declared dimension)")
    if not all(math.isfinite(x) for x in values):
        raise ValueError(f"vector {index} holds NaN or an infinite value")
    return struct.pack(f"<{dimension}e", *values)


def decode(blobs: Sequence[bytes | memoryview | None], dimension: int, *,
           legacy: bool = False) -> tuple[list[int], Any]:
    """The readable ones of ``blobs``: (their positions in ``blobs``, their vectors as float32:
    an ``(n, dimension)`` numpy matrix, or a list of tuples without numpy). A blob of another
    size, or None, is left out.

    ``legacy``: also read float32 rows (4 bytes per dimension). Only for rows known to be of
    this model (the row names it): by size alone, a float16 vector of twice the dimension
    looks the same."""
    sizes = (BYTES_PER_DIMENSION * dimension, _LEGACY * dimension if legacy else -1)
    keep = [i for i, b in enumerate(blobs) if b is not None and len(b) in sizes]
    try:
        import numpy as np
    except ImportError:
        return keep, [_decode_plain(bytes(blobs[i]), dimension) for i in keep]  # type: ignore[arg-type]
    out = np.empty((len(keep), dimension), dtype=np.float32)
    half = [i for i in keep if len(blobs[i]) == sizes[0]]  # type: ignore[arg-type]
    if len(half) == len(keep):  # the usual case: one join, one conversion
        if keep:
            out[:] = np.frombuffer(b"".join(bytes(blobs[i]) for i in keep),  # type: ignore[arg-type]
                                   dtype="<f2").reshape(len(keep), dimension)
        return keep, out
    for row, i in enumerate(keep):
        blob = bytes(blobs[i])  # type: ignore[arg-type]
        out[row] = np.frombuffer(blob, dtype="<f2" if len(blob) == sizes[0] else "<f4")
    return keep, out


def _decode_plain(blob: bytes, dimension: int) -> tuple[float, ...]:
    code = "e" if len(blob) == BYTES_PER_DIMENSION * dimension else "f"
    return struct.unpack(f"<{dimension}{code}", blob)


def upsert_sql(table: str, items: str, *, key: str = "id", item_key: str = "id",
               item_condition: str = "") -> str:
    """The statement that writes one vector row into ``table`` (SQLite spelling, ``?``
    placeholders; both backends run it): parameters (item id, model, text hash, vector bytes,
    item id again, then those of ``item_condition``). The row is written only while the item is
    still in ``items`` (``item_key`` = the id, and ``item_condition``, an SQL condition on that
    row), so an item deleted meanwhile (a forget) gets no vector; a row already there is
    replaced."""
    condition = f" AND {item_condition}" if item_condition else ""
    return (f"INSERT INTO {table}({key}, model, text_hash, vec) SELECT ?, ?, ?, ? WHERE EXISTS "
            f"(SELECT 1 FROM {items} WHERE {item_key} = ?{condition}) ON CONFLICT ({key}) DO "
            "UPDATE SET model = excluded.model, text_hash = excluded.text_hash, vec = excluded.vec")
