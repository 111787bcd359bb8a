"""`ragcanary run` says why queries failed: a count and the first error of each kind."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-run-output-77a"
QUERIES = [f"question {i:02d}" for i in range(16)]


def test_sixteen_failures_of_one_kind_are_one_line_with_the_first_error(tmp_path: Path) -> None:
    cases = [
        {"id": f"c{i:02d}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (tmp_path / "suite.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        retriever.status = 503
        config = {
            "storage": f"sqlite:///{tmp_path / 'r.db'}",
            "targets": {"vendor": target_entry(retriever.url, retries=0)},
            "suites": {"core": {"cases": "suite.json", "targets": ["vendor"]}},
        }
        (tmp_path / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        result = CliRunner().invoke(
            app, ["run", "-c", str(tmp_path / "ragcanary.yaml")], env={"VENDOR_KEY": API_KEY}
        )
    assert result.exit_code == 3
    lines = [line for line in result.stderr.splitlines() if "http_5xx" in line]
    assert len(lines) == 1, result.stderr
    assert "http_5xx: 16 queries, first (c00): HTTP 503" in lines[0]
    assert "16 of 16 queries unanswered (coverage 0%)" in result.stderr


FAMILIES = ["hit_rate", "precision", "recall", "ndcg", "map", "mrr"]


def test_a_regression_s_reasons_are_floors_then_one_line_a_metric_then_the_broken_canaries(
    tmp_path: Path,
) -> None:
    """A drop at every k was 21 lines that buried the floor breach and the broken canaries:
    now the floors come first, each metric family is one line (its worst k, naming the other
    ks), then each canary that broke its own limit. The report JSON keeps every failure."""
    queries = [f"question {i:02d}" for i in range(30)]
    cases: list[dict[str, object]] = [
        {"id": f"case-{i:02d}", "query": q, "relevant": {f"rel-{i}": 2, f"doc-{i}-0": 1}}
        for i, q in enumerate(queries)
    ]
    for case in cases[0:4:3]:  # case-00 and case-03: their top hit must score 0.9 or more
        case["min_score"] = 0.9
    (tmp_path / "suite.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = tmp_path / "ragcanary.yaml"
    with FakeRetriever(corpus=graded_corpus(queries), api_key=API_KEY) as retriever:
        suite = {
            "cases": "suite.json",
            "targets": ["vendor"],
            "k": [1, 3, 5, 10],
            "depth": 10,
            "thresholds": {"hit_rate": {1: 0.65, 5: 0.7}, "max_drop": 0.02},
        }
        settings = {
            "storage": f"sqlite:///{tmp_path / 'r.db'}",
            "targets": {"vendor": target_entry(retriever.url, retries=0)},
            "suites": {"core": suite},
        }
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        env = {"VENDOR_KEY": API_KEY, "COLUMNS": "400"}
        base = tmp_path / "base.json"
        first = CliRunner().invoke(app, ["run", "-c", str(config), "--report", str(base)], env=env)
        assert first.exit_code == 0, first.output
        # 12 of the 30 canaries lose every relevant document.
        retriever.drop_ids = {f"rel-{i}" for i in range(12)} | {f"doc-{i}-0" for i in range(12)}
        files = ["--report", "now.json", "--markdown", "now.md", "--junit", "now.xml"]
        args = ["run", "-c", str(config), "--baseline", str(base)]
        args += [str(tmp_path / f) if f.startswith("now") else f for f in files]
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 1, result.output
    lines = [line[2:] for line in result.output.splitlines() if line.startswith("✗ ")]
    assert lines[0].startswith("hit_rate@5 0.6000 is below the floor 0.7000"), lines
    assert "also below its floor at @1" in lines[0], lines
    drops = lines[1:-2]
    # Every family, bpref, then the note that the judged share fell with them (judged@k).
    named = [line.partition("@")[0].partition(" ")[0] for line in drops]
    assert named == [*FAMILIES, "bpref", "judged"], lines
    assert drops[-1].endswith("new unjudged documents may explain part of this drop"), lines
    for line in drops[:-3]:  # each names the worst k first, then the others
        worst = line.partition(" ")[0].partition("@")[2]
        others = [f"@{k}" for k in ("1", "3", "5", "10") if k != worst]
        assert line.endswith(f"also dropped at {', '.join(others)})"), line
    assert [line.split(":")[0] for line in lines[-2:]] == ["canary case-00", "canary case-03"]
    report = json.loads((tmp_path / "now.json").read_text(encoding="utf-8"))
    kinds = [f["kind"] for f in report["failures"]]
    assert (kinds.count("floor"), kinds.count("drop"), kinds.count("min_score")) == (2, 22, 2)
    # Each floor and drop records how bad it is, so that readers of stored runs group alike.
    assert all(f["amount"] > 0 for f in report["failures"] if f["kind"] in ("floor", "drop"))
    markdown = (tmp_path / "now.md").read_text(encoding="utf-8")
    section = markdown.partition("### Failures\n\n")[2].partition("\n\n")[0]
    assert len(section.splitlines()) == len(lines) == 11, section
    suite = ET.parse(tmp_path / "now.xml").getroot()[0]
    run = suite.find("testcase[@name='run']/failure")
    assert run is not None
    assert run.get("message", "").count("more than max_drop") == len(FAMILIES) + 1  # bpref
    case = suite.find("testcase[@name='case-00']/failure")
    assert case is not None
    # One change per metric family of the canary (ap, bpref, hit_rate, ndcg, precision, recall,
    # rr) and the limit it broke, where every metric at every k was 22 changes.
    changes = case.get("message", "").split("; ")
    assert len(changes) == 8, changes
    assert "bpref 1 -> 0" in changes
    assert "hit_rate@1 1 -> 0 (also dropped at @3, @5, @10)" in changes
