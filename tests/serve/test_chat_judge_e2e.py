"""A chat-shaped judge on a local OpenAI-compatible server, behind `ragcanary serve`: a 503 is
retried, an answer that is no grade is refused and counted (never asked again), a document the
generic target's `fetch:` cannot give is counted, and the key never reaches the log."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import DaemonProcess, config_yaml, running, wait_for
from server_process import free_port

pytestmark = pytest.mark.e2e

KEY = "sk-judge-secret-77"
BEFORE = ["d1", "d2"]
AFTER = ["d1", "d3", "d4", "d5", "d6"]  # d3-d6 enter; d6 has no document to fetch
ANSWERS = {"d3": "2", "d4": "I am unable to grade this document.", "d5": " 3\n"}


class Backend:
    """The retriever (POST /search, GET /docs/{id}) and the chat model, on one port."""

    def __init__(self) -> None:
        self.ranking = list(BEFORE)
        self.chat: list[dict[str, Any]] = []
        self.failed_once = False
        self.lock = threading.Lock()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                doc = self.path.removeprefix("/docs/")
                if doc == "d6" or not doc.startswith("d"):
                    return self._send(404, {"error": "no such document"})
                return self._send(200, {"doc": {"body": f"the text of document {doc}"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/search":
                    with backend.lock:
                        hits = [
                            {"id": d, "score": 1.0 - i / 10} for i, d in enumerate(backend.ranking)
                        ]
                    return self._send(200, {"hits": hits})
                with backend.lock:
                    backend.chat.append({"body": body, "auth": self.headers.get("Authorization")})
                    if not backend.failed_once:
                        backend.failed_once = True
                        return self._send(503, {"error": "overloaded"})
                text = body["messages"][1]["content"]
                doc = text.rsplit("document ", 1)[-1].strip()
                message = {"role": "assistant", "content": ANSWERS[doc]}
                return self._send(200, {"choices": [{"index": 0, "message": message}]})

            def _send(self, status: int, payload: Any) -> None:
                out = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Backend:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def backend() -> Iterator[Backend]:
    with Backend() as started:
        yield started


def test_a_chat_judge_retries_counts_refusals_and_missing_texts(
    backend: Backend, tmp_path: Path
) -> None:
    (tmp_path / "core.yaml").write_text(
        "cases:\n  - {id: q1, query: what is d1, relevant: [d1]}\n", encoding="utf-8"
    )
    port = free_port()
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "log_format": "json",
        "judges": {
            "llm": {
                "kind": "chat",
                "url": f"{backend.url}/v1/chat/completions",
                "model": "grader-1",
                "headers": {"Authorization": "Bearer ${JUDGE_KEY}"},
                "retries": 1,
                "timeout": "5s",
            }
        },
        "targets": {
            "search": {
                "url": f"{backend.url}/search",
                "body": {"q": "{query}"},
                "fetch": {"url": f"{backend.url}/docs/{{id}}", "text": "doc.body"},
            }
        },
        "suites": {
            "core": {
                "cases": "core.yaml",
                "targets": ["search"],
                "judge": "llm",
                "every": "1s",
                "k": [1, 5],
                "depth": 5,
                # The new ids move the list; only the judge's failures could fail a run here.
                "thresholds": {"min_rank_overlap": None},
            }
        },
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(config_yaml(config), encoding="utf-8")
    daemon = DaemonProcess(path, port, {"JUDGE_KEY": KEY})
    with running(daemon):
        daemon.wait_runs("core", "search", 1, timeout=30)
        with backend.lock:
            backend.ranking = list(AFTER)

        def judged() -> dict[str, dict[str, Any]]:
            rows = daemon.get("/api/v1/judgments", state="all").json()["judgments"]
            done = {r["doc_id"]: r for r in rows if r["state"] != "queued"}
            return done if len(done) == 4 else {}

        rows = wait_for(judged, 30, "the chat judge's grades")
        assert {d: (r["state"], r["grade"]) for d, r in rows.items()} == {
            "d3": ("proposed", 2),
            "d4": ("refused", None),
            "d5": ("proposed", 3),
            "d6": ("refused", None),
        }
        assert "no grade 0-3" in rows["d4"]["note"]
        assert "has no text for this id" in rows["d6"]["note"]
        assert rows["d3"]["fingerprint"].startswith("chat:grade-0-3-v1:")
        # A 503 asked again once, then one request per document with a text; none after that.
        daemon.wait_runs("core", "search", 3, timeout=30)
        with backend.lock:
            chat = list(backend.chat)
        assert len(chat) == 4
        assert chat[0]["body"] == chat[1]["body"]  # the retry
        assert {c["auth"] for c in chat} == {f"Bearer {KEY}"}
        assert all(c["body"]["model"] == "grader-1" and c["body"]["temperature"] == 0 for c in chat)
        scrape = daemon.scrape()
        assert scrape.number("ragcanary_judge_errors_total", judge="llm", reason="unparseable") == 1
        assert scrape.number("ragcanary_judge_errors_total", judge="llm", reason="no_text") == 1
        assert scrape.number("ragcanary_judge_errors_total", judge="llm", reason="http_5xx") == 0
        assert scrape.number("ragcanary_judgments_pending") == 2
        assert all(
            o == "ok" for o in (r["outcome"] for r in daemon.get("/api/v1/runs").json()["runs"])
        )
        assert KEY not in daemon.log
        warnings = [
            e for e in daemon.events() if e.get("event") == "judge did not grade every entered id"
        ]
        assert len(warnings) == 1
        assert warnings[0]["failed"] == {"no_text": 1, "unparseable": 1}
