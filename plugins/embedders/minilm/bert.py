"""A BERT encoder's forward pass in numpy: enough to run all-MiniLM-L6-v2 without torch.

The model is a 6-layer BERT (hidden size 384, 12 heads, GELU feed-forward of 1536). A sentence
embedding is the mean of the last layer's token vectors over the real (unpadded) tokens, then
L2-normalised: what sentence-transformers does for this model. Weights come from the model's
``model.safetensors`` and the WordPiece tokenizer from its ``tokenizer.json`` (the ``tokenizers``
package), so the dependencies are numpy, tokenizers and safetensors (about 60 MB) instead of
torch.

Arithmetic is float32 like the reference; GELU uses the exact erf form, with erf computed by a
rational approximation whose error (below 1.5e-7) is about float32's own rounding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Bert", "BertConfig"]

F32 = NDArray[np.float32]


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    heads: int
    layers: int
    eps: float
    max_tokens: int

    @classmethod
    def read(cls, folder: Path) -> BertConfig:
        raw = json.loads((folder / "config.json").read_text())
        max_tokens = 256
        st = folder / "sentence_bert_config.json"
        if st.exists():
            max_tokens = int(json.loads(st.read_text()).get("max_seq_length", max_tokens))
        return cls(hidden=int(raw["hidden_size"]), heads=int(raw["num_attention_heads"]),
                   layers=int(raw["num_hidden_layers"]), eps=float(raw["layer_norm_eps"]),
                   max_tokens=min(max_tokens, int(raw["max_position_embeddings"])))


#: Abramowitz and Stegun 7.1.26: erf(a) = 1 - t (c1 + t (c2 + ...)) exp(-a^2), t = 1 / (1 + p a)
_ERF_P = 0.3275911
_ERF_C = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # c5 .. c1


#: rows of the feed-forward layer computed at a time: its arrays (rows x 1536 floats) stay in
#: the CPU's cache; element-wise numpy over arrays of megabytes is several times slower
FFN_ROWS = 32


class _Scratch:
    """Arrays the feed-forward blocks reuse (allocating megabytes per layer costs page faults)."""

    def __init__(self, rows: int, width: int) -> None:
        self.h, self.a, self.t, self.p = (np.empty((rows, width), np.float32) for _ in range(4))

    def view(self, rows: int) -> tuple[F32, F32, F32, F32]:
        return self.h[:rows], self.a[:rows], self.t[:rows], self.p[:rows]


def _gelu_(h: F32, a: F32, t: F32, p: F32) -> None:
    """Exact (erf) GELU of ``h``, in place, using the scratch arrays ``a``, ``t`` and ``p`` (of
    ``h``'s shape); float32 throughout.

    gelu(h) = h (1 + erf(h / sqrt 2)) / 2 = relu(h) - |h| r with r = (1 - erf(|h| / sqrt 2)) / 2
    = poly(t) exp(-h^2 / 2) / 2, so everything but the relu works on |h|, and the sign
    bookkeeping of an odd erf disappears. erf's error (below 1.5e-7) is about float32's own
    rounding. The exponent is bounded below by -80, where the term is already 0 to float32
    precision, so no subnormal number (many times slower on x86) is ever made.
    """
    np.abs(h, out=a)
    np.multiply(a, np.float32(_ERF_P / np.sqrt(2.0)), out=t)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    np.multiply(t, np.float32(_ERF_C[0]), out=p)  # Horner: p = poly(t)
    for c in _ERF_C[1:]:
        p += np.float32(c)
        p *= t
    np.multiply(a, a, out=t)  # t now holds exp(-h^2 / 2)
    t *= np.float32(-0.5)
    np.maximum(t, np.float32(-80.0), out=t)
    np.exp(t, out=t)
    p *= t
    p *= np.float32(0.5)
    a *= p
    np.maximum(h, np.float32(0.0), out=h)
    h -= a


def _layer_norm_(x: F32, w: F32, b: F32, eps: float) -> None:
    """Layer normalisation of each row of ``x``, in place."""
    x -= x.mean(-1, keepdims=True)
    var = np.square(x).mean(-1, keepdims=True)
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= w
    x += b


class Bert:
    """The encoder with its weights; :meth:`encode` is thread-safe (it only reads them)."""

    def __init__(self, config: BertConfig, weights: dict[str, Any]) -> None:
        self.config = config
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> F32:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        self.word = w("embeddings.word_embeddings.weight")
        # every token is of type 0: its embedding is added to the positions' once, here
        self.position_type = (w("embeddings.position_embeddings.weight")
                              + w("embeddings.token_type_embeddings.weight")[0])
        self.ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(config.layers):
            p = f"encoder.layer.{i}."
            # query, key and value in one product; the query's part is scaled by
            # 1/sqrt(head size) here instead of every score at run time
            scale = np.float32(1.0 / np.sqrt(config.hidden // config.heads))
            qkv_w = np.concatenate([w(p + "attention.self.query.weight") * scale,
                                    w(p + "attention.self.key.weight"),
                                    w(p + "attention.self.value.weight")]).T.copy()
            qkv_b = np.concatenate([w(p + "attention.self.query.bias") * scale,
                                    w(p + "attention.self.key.bias"),
                                    w(p + "attention.self.value.bias")])
            self.layers.append((
                qkv_w, qkv_b,
                w(p + "attention.output.dense.weight").T.copy(), w(p + "attention.output.dense.bias"),
                w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"),
                w(p + "intermediate.dense.weight").T.copy(), w(p + "intermediate.dense.bias"),
                w(p + "output.dense.weight").T.copy(), w(p + "output.dense.bias"),
                w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"),
            ))
        if self.word.shape[1] != config.hidden:
            raise ValueError(f"word embeddings are {self.word.shape[1]} wide, the config says "
                             f"{config.hidden}")

    def encode(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> F32:
        """Token ids and attention mask (batch, length) -> normalised sentence vectors.

        Every dense layer is one 2-D product over all the batch's tokens, and its bias, the
        residual, layer norm and GELU then work in place on that product: apart from BLAS, a
        layer allocates a handful of arrays of the batch's size (kept small by the caller's
        batching, so they stay in the CPU's cache).
        """
        cfg = self.config
        batch, length = ids.shape
        heads, size = cfg.heads, cfg.hidden // cfg.heads
        x = self.word[ids]
        x += self.position_type[:length]
        x = x.reshape(batch * length, cfg.hidden)
        _layer_norm_(x, *self.ln, cfg.eps)
        # masked keys get a large negative score (the reference uses the dtype's minimum)
        bias = ((1 - mask[:, None, None, :]) * np.finfo(np.float32).min).astype(np.float32)
        scratch = _Scratch(min(FFN_ROWS, len(x)), self.layers[0][6].shape[1])
        for (qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, out_w, out_b, ln2_w,
             ln2_b) in self.layers:
            qkv = x @ qkv_w
            qkv += qkv_b
            qkv5 = qkv.reshape(batch, length, 3, heads, size)
            q, k, v = (qkv5[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            scores = q @ k.transpose(0, 1, 3, 2)  # the queries carry 1/sqrt(size) already
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, cfg.hidden)
            y = ctx @ o_w
            y += o_b
            y += x
            _layer_norm_(y, ln1_w, ln1_b, cfg.eps)
            x = np.empty_like(y)
            for r in range(0, len(y), FFN_ROWS):  # feed-forward by blocks of rows (see FFN_ROWS)
                rows = y[r:r + FFN_ROWS]
                h, a, t, p = scratch.view(len(rows))
                np.matmul(rows, i_w, out=h)
                h += i_b
                _gelu_(h, a, t, p)
                np.matmul(h, out_w, out=x[r:r + FFN_ROWS])
            x += out_b
            x += y
            _layer_norm_(x, ln2_w, ln2_b, cfg.eps)
        m = mask.astype(np.float32)
        pooled = np.einsum("blh,bl->bh", x.reshape(batch, length, cfg.hidden), m)
        pooled /= np.clip(m.sum(1, keepdims=True), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled /= np.clip(norms, 1e-12, None)
        return pooled  # type: ignore[no-any-return]
