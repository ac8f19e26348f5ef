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


def _erf(x: F32) -> F32:
    # Abramowitz and Stegun 7.1.26 (absolute error <= 1.5e-7)
    sign = np.sign(x)
    a = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return (sign * (np.float32(1.0) - poly * np.exp(-a * a))).astype(np.float32)  # type: ignore[no-any-return]


def _gelu(x: F32) -> F32:
    return (0.5 * x * (1.0 + _erf(x * np.float32(1.0 / np.sqrt(2.0))))).astype(np.float32)


def _layer_norm(x: F32, w: F32, b: F32, eps: float) -> F32:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)  # type: ignore[no-any-return]


class Bert:
    """The encoder with its weights; :meth:`encode` is thread-safe (it only reads them)."""

    def __init__(self, config: BertConfig, weights: dict[str, Any]) -> None:
        self.config = config
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

        def w(name: str) -> F32:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(config.layers):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([w(p + f"attention.self.{k}.weight") for k in
                                    ("query", "key", "value")]).T.copy()
            qkv_b = np.concatenate([w(p + f"attention.self.{k}.bias") for k in
                                    ("query", "key", "value")])
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
        """Token ids and attention mask (batch, length) -> normalised sentence vectors."""
        cfg = self.config
        batch, length = ids.shape
        heads, size = cfg.heads, cfg.hidden // cfg.heads
        x = self.word[ids] + self.position[:length][None] + self.token_type[0][None, None]
        x = _layer_norm(x, *self.ln, cfg.eps)
        # masked keys get a large negative score (the reference uses the dtype's minimum)
        bias = ((1.0 - mask[:, None, None, :].astype(np.float32))
                * np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(size))
        x = x.reshape(batch * length, cfg.hidden)  # dense layers as 2-D products (one BLAS call)
        for (qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, out_w, out_b, ln2_w,
             ln2_b) in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(batch, length, 3, heads, size)
            q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, cfg.hidden)
            x = _layer_norm(ctx @ o_w + o_b + x, ln1_w, ln1_b, cfg.eps)
            h = _gelu(x @ i_w + i_b)
            x = _layer_norm(h @ out_w + out_b + x, ln2_w, ln2_b, cfg.eps)
        x = x.reshape(batch, length, cfg.hidden)
        m = mask[..., None].astype(np.float32)
        pooled = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)  # type: ignore[no-any-return]
