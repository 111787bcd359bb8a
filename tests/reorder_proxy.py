"""A proxy in front of the demo retriever that can demote each query's best-graded document.

Swapping the first two relevant hits of different grades keeps every relevant document in
the top-k at a relevant position, so Hit@k, precision, recall and MRR stay exactly as they
were while NDCG falls: a regression by NDCG only, which the demo's own modes cannot make.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from importlib.resources import files
from types import TracebackType
from typing import Any

import httpx
import yaml
from retrievers import ServerThread


def demo_grades() -> dict[str, dict[str, float]]:
    """Query text -> {document id: grade} of the demo suite's labelled cases."""
    suite = yaml.safe_load(files("ragcanary.demo").joinpath("suite.yaml").read_text("utf-8"))
    grades: dict[str, dict[str, float]] = {}
    for case in suite["cases"]:
        relevant = case.get("relevant") or {}
        if isinstance(relevant, list):
            relevant = dict.fromkeys(relevant, 1)
        grades[case["query"]] = {str(doc): float(grade) for doc, grade in relevant.items()}
    return grades


def demote_best(hits: list[dict[str, Any]], grades: Mapping[str, float]) -> list[dict[str, Any]]:
    """``hits`` with the ids of the first two relevant ones swapped when the first is graded
    higher; the scores stay in place, so the top score and every canary's min_score hold.
    """
    relevant = [i for i, hit in enumerate(hits) if grades.get(str(hit.get("id")), 0) > 0]
    if len(relevant) < 2:
        return hits
    first, second = relevant[0], relevant[1]
    if grades[str(hits[first]["id"])] <= grades[str(hits[second]["id"])]:
        return hits
    swapped = list(hits)
    swapped[first] = {**hits[first], "id": hits[second]["id"]}
    swapped[second] = {**hits[second], "id": hits[first]["id"]}
    return swapped


class ReorderProxy:
    """``POST /search`` forwarded to ``upstream``; with ``demote`` set, answers reordered."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.demote = False
        self.grades = demo_grades()
        self._client = httpx.Client(timeout=10)
        self._serving: ServerThread | None = None

    @property
    def port(self) -> int:
        assert self._serving is not None, "enter the ReorderProxy first"
        return self._serving.address[1]

    def answer(self, body: bytes) -> tuple[int, bytes]:
        """The upstream's status and body for a search request, reordered when demoting."""
        response = self._client.post(
            self.upstream, content=body, headers={"Content-Type": "application/json"}
        )
        if not self.demote or response.status_code != 200:
            return response.status_code, response.content
        payload = response.json()
        query = str(json.loads(body).get("q", ""))
        payload["hits"] = demote_best(list(payload.get("hits") or []), self.grades.get(query, {}))
        return 200, json.dumps(payload).encode("utf-8")

    def __enter__(self) -> ReorderProxy:
        self._serving = ServerThread(_handler(self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._serving is not None:
            self._serving.stop()
        self._client.close()


def _handler(proxy: ReorderProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                status, payload = proxy.answer(body)
            except httpx.HTTPError as exc:
                status, payload = 502, json.dumps({"detail": str(exc)}).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test's output stays readable

    return Handler
