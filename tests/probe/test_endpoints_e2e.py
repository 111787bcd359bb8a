"""A target's ``endpoints:`` end to end: `ragcanary run` against two real retrievers on
127.0.0.1, the target's url and a replica, that answer some canaries differently.

The replica is asked every canary the url answered; its answers are compared with the url's
in the report's ``endpoints``, and a divergence is on the diagnosis's causes whatever leads:
beside ``none`` while the url is fine, leading once the url regresses for no reason a lost id
can name, and never at all when the replica is down (docs/report.md, "endpoints").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-replicas-5e1b7a"
QUERIES = [f"question {i:02d}" for i in range(10)]
CASES = [f"case-{i:02d}" for i in range(10)]
SUITE = {
    "cases": [
        {"id": case, "query": query, "relevant": [f"rel-{i}"]}
        for i, (case, query) in enumerate(zip(CASES, QUERIES, strict=True))
    ]
}


def _reindexed(queries: range) -> dict[str, list[tuple[str, float]]]:
    """The corpus with ``queries`` answered from other documents (a stale or broken index)."""
    corpus = graded_corpus(QUERIES)
    for i in queries:
        corpus[QUERIES[i]] = [(f"stale-{i}-{j}", round(0.9 - j * 0.05, 4)) for j in range(10)]
    return corpus


@dataclass
class Replicas:
    """The target's url and its one endpoint, ``replica``, both serving the suite's corpus."""

    url: FakeRetriever
    replica: FakeRetriever
    config: Path


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    with (
        FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as url,
        FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as replica,
    ):
        target = target_entry(url.url, timeout="2s", retries=0, endpoints={"replica": replica.url})
        core = {"cases": "suite.yaml", "targets": ["search"], "k": [1, 3], "depth": 10}
        (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        config = tmp_path / "ragcanary.yaml"
        data = {"targets": {"search": target}, "suites": {"core": core}}
        config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        yield Replicas(url, replica, config)


def _run(config: Path, report: str, *extra: str) -> tuple[int, list[str], dict[str, Any]]:
    """`ragcanary run --report`: its exit code, its output's lines and the report."""
    args = ["run", "-c", str(config), "--report", str(config.parent / report), *extra]
    result = CliRunner().invoke(app, args, env={"VENDOR_KEY": API_KEY, "COLUMNS": "300"})
    written = json.loads((config.parent / report).read_text(encoding="utf-8"))
    return result.exit_code, result.output.splitlines(), written


def _cause_line(lines: list[str]) -> str:
    """The line `ragcanary run` prints under its verdict: the leading cause."""
    [line] = [line for line in lines if line.startswith("cause ")]
    return line


def test_a_replica_that_diverges_is_reported_then_named_when_the_url_regresses(
    replicas: Replicas,
) -> None:
    # The replica answers two canaries from other documents; the url is fine: the run passes.
    replicas.replica.corpus = _reindexed(range(8, 10))
    code, lines, first = _run(replicas.config, "first.json")
    assert code == 0, lines
    assert first["endpoints"] == {
        "replica": {"url": replicas.replica.url, "asked": 10, "answered": 10, "rbo_min": 0.0,
                    "rbo_mean": 0.8, "diverged": ["case-08", "case-09"], "unanswered": {},
                    "error": None},
    }  # fmt: skip
    assert len(replicas.replica.requests) == 10  # each canary once
    assert first["diagnosis"]["cause"] == "none"
    [listed] = first["diagnosis"]["causes"]
    assert listed["cause"] == "replica_divergence"
    assert listed["cases"] == ["case-08", "case-09"]
    assert f"endpoint replica ({replicas.replica.url})" in listed["evidence"]
    assert _cause_line(lines).startswith("cause none: ")

    # Now the url answers five canaries from other documents, and nothing says why: the
    # replicas disagree, and the one that diverges is named.
    replicas.url.corpus = _reindexed(range(5))
    baseline = str(replicas.config.parent / "first.json")
    code, lines, second = _run(replicas.config, "second.json", "--baseline", baseline)
    assert code == 1, lines
    assert second["outcome"] == "regression"
    assert second["endpoints"]["replica"]["diverged"] == [*CASES[:5], "case-08", "case-09"]
    assert second["diagnosis"]["cause"] == "replica_divergence"
    assert _cause_line(lines) == (
        "cause replica_divergence: endpoint replica answers 7 canaries unlike the target's url "
        "(RBO down to 0.00, under 0.7): case-00, case-01, case-02, case-03, case-04 and 2 more"
    )
    # The url's answers alone made the metrics: the replica still had every document.
    assert second["metrics"]["hit_rate@3"] == pytest.approx(0.5)


def test_a_replica_that_answers_nothing_changes_nothing_but_its_own_entry(
    replicas: Replicas,
) -> None:
    replicas.replica.status = 503
    code, lines, report = _run(replicas.config, "down.json")
    assert code == 0, lines
    assert report["outcome"] == "ok"
    assert report["coverage"] == 1.0
    assert report["diagnosis"]["cause"] == "none"
    assert report["diagnosis"]["causes"] == []
    entry = report["endpoints"]["replica"]
    assert (entry["asked"], entry["answered"], entry["rbo_min"]) == (10, 0, None)
    assert entry["unanswered"] == {"http_5xx": 10}
    assert entry["error"].startswith("case-00: ")
