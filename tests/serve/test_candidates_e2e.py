"""Failure reports against a real `ragcanary serve`, reviewed and promoted with the CLI.

An application posts 500 reports through a proxy: duplicates worded differently, oversized
and malformed ones, one with an e-mail address, some without or with a wrong token, and a
burst from one client. The daemon keeps running, refuses the bad ones with a reason, stores
the rest by normalised query with the address redacted; `candidates promote` appends a case to a
commented suite file, and after a reload the daemon runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from daemon_harness import DaemonProcess, free_port, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-candidates-8d2"
INGEST = "ingest-token-5f0c"
ADMIN = "admin-token-91ab"
QUERIES = [f"question {i:02d}" for i in range(6)]
SUITE = """\
# Core canaries, kept by hand: the comments must survive a promotion.
cases:
  # The first question of the fixture retriever.
  - id: first
    query: question 00   # graded corpus: rel-0 near the top
    relevant: [rel-0]
"""
DEADLINE_S = 30.0


@pytest.fixture
def retriever() -> Any:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _daemon(directory: Path, url: str) -> DaemonProcess:
    (directory / "core.yaml").write_text(SUITE, encoding="utf-8")
    port = free_port()
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(url, timeout="5s", retries=0)},
        "suites": {"core": {"cases": "core.yaml", "targets": ["vendor"], "every": "1s"}},
        # The test is the proxy: each application client is the address it forwards.
        "forwarded_allow_ips": ["127.0.0.1"],
    }
    (directory / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {
        "VENDOR_KEY": API_KEY,
        "RAGCANARY_INGEST_TOKEN": INGEST,
        "RAGCANARY_ADMIN_TOKEN": ADMIN,
        "RAGCANARY_LOG_FORMAT": "json",
    }
    return DaemonProcess(directory / "ragcanary.yaml", port, env)


def _cli(daemon: DaemonProcess, *args: str) -> Any:
    env = {"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
    result = CliRunner().invoke(app, [*args, "-c", str(daemon.config)], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_failure_reports_are_checked_deduplicated_redacted_and_promoted(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    daemon = _daemon(tmp_path, retriever.url)
    url = "/api/v1/candidates"
    ingest = {"Authorization": f"Bearer {INGEST}"}
    statuses: dict[str, list[int]] = {}
    with running(daemon), httpx.Client(base_url=daemon.url, timeout=10) as client:

        def post(kind: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
            response = client.post(url, headers=headers, **kwargs)
            statuses.setdefault(kind, []).append(response.status_code)
            return response

        for i in range(400):  # 8 questions, each worded 50 ways, from 20 clients
            query = (
                f"  Question {i % 8:02d}{'?' * (i % 3)} ".upper()
                if i % 2
                else f"question {i % 8:02d}"
            )
            body = {"query": query, "signal": ("thumbs_down", "rephrased")[i % 2]}
            forwarded = {**ingest, "X-Forwarded-For": f"10.1.0.{i % 20}"}
            post("valid", forwarded, json={**body, "source": f"app-{i % 20}", "target": "vendor"})
        email = {"query": "why is ana@example.com locked out", "signal": "abandoned"}
        post("valid", ingest, json={**email, "ids": ["doc-3", "doc-9"]})
        for _ in range(20):
            post("no token", {}, json=email)
            post("wrong token", {"Authorization": "Bearer nope"}, json=email)
        for _ in range(15):
            post("malformed", ingest, content=b"{not json")
            post("oversized", ingest, json={"query": "x" * 2001, "signal": "other"})
        flooder = {**ingest, "X-Forwarded-For": "10.9.9.9"}
        flood = [post("flood", flooder, json={**email, "source": "flood"}) for _ in range(29)]
        assert sum(len(v) for v in statuses.values()) == 500

        assert set(statuses["valid"]) == {202}
        assert set(statuses["no token"]) == set(statuses["wrong token"]) == {401}
        assert set(statuses["malformed"]) == set(statuses["oversized"]) == {400}
        assert (
            "more than 2000"
            in client.post(
                url, headers=ingest, json={"query": "x" * 2001, "signal": "other"}
            ).json()["detail"]
        )
        assert [r.status_code for r in flood].count(202) == 29  # within its burst of 50
        # Another source named in the body changes nothing: the limit counts the client.
        burst = [client.post(url, headers=flooder, json={**email, "source": "flood-0"})]
        while burst[-1].status_code == 202 and len(burst) < 100:
            again = {**email, "source": f"flood-{len(burst)}"}
            burst.append(client.post(url, headers=flooder, json=again))
        assert burst[-1].status_code == 429, "a client past its burst must be slowed down"
        assert float(burst[-1].headers["Retry-After"]) >= 1
        assert "too many reports from 10.9.9.9" in burst[-1].json()["detail"]
        assert daemon.get("/healthz").status_code == 200

        admin = {"Authorization": f"Bearer {ADMIN}"}
        assert client.get(url).status_code == 401  # what users asked is not public

        def stored() -> list[dict[str, Any]]:
            return list(client.get(url, headers=admin).json()["candidates"])

        flooded = 29 + len(burst)  # the e-mail question: once, 29 in the flood, the burst's 202s
        wait_for(
            lambda: sum(r["reports"] for r in stored()) == 400 + flooded,
            DEADLINE_S,
            "every accepted report stored",
        )
        rows = stored()
        assert [r["reports"] for r in rows] == sorted([50] * 8 + [flooded], reverse=True)
        (redacted,) = [r for r in rows if "locked out" in r["query"]]
        assert redacted["query"] == "why is <email> locked out"
        assert "ana@example.com" not in json.dumps(rows)
        scrape = daemon.scrape()
        assert scrape.value("ragcanary_candidates_received_total", signal="thumbs_down") == 200
        assert scrape.value("ragcanary_candidates_dropped_total", reason="invalid") == 15
        assert scrape.value("ragcanary_candidates_dropped_total", reason="too_large") == 16
        wait_for(
            lambda: daemon.scrape().value("ragcanary_candidates_pending", signal="abandoned") == 1,
            DEADLINE_S,
            "the pending gauge",
        )

        listed = json.loads(_cli(daemon, "candidates", "list", "--json"))
        assert [r["id"] for r in listed] == [r["id"] for r in rows]
        first = next(r for r in listed if r["query"] == "question 02")
        shown = _cli(daemon, "candidates", "show", str(first["id"]))
        assert "50 reports" in shown
        assert "now on vendor: ok" in shown  # what the live target answers for it now
        assert "rel-2" in shown
        _cli(
            daemon,
            "candidates",
            "promote",
            str(first["id"]),
            "--suite",
            "core",
            "--relevant",
            "rel-1",
            "--tags",
            "from-users",
        )
        suite_text = (tmp_path / "core.yaml").read_text()
        assert suite_text.startswith(SUITE)  # not a comment or space of it changed
        assert "id: question-02" in suite_text
        assert _cli(daemon, "candidates", "list", "--json").count('"question 02"') == 0
        _cli(daemon, "candidates", "dismiss", str(redacted["id"]), "--reason", "account issue")

        reloaded = client.post("/-/reload", headers=admin)
        assert reloaded.status_code == 200, reloaded.text

        def runs_new_case() -> bool:
            latest = client.get("/api/v1/runs", params={"limit": 1}).json()["runs"][0]
            report = client.get(f"/api/v1/runs/{latest['run_id']}").json()
            return "question-02" in {c["id"] for c in report["cases"]}

        wait_for(runs_new_case, DEADLINE_S, "a run with the promoted case")
