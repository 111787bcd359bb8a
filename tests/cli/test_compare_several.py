"""`ragcanary compare` of several targets, against real retrievers on 127.0.0.1.

Four targets serve the same graded corpus: the reference, one equal to it, one that lost
the relevant document of 2 of the 30 canaries (slightly worse) and one that lost it on 15
(much worse). The comparison's numbers must be those of each target's own `ragcanary run`
and of the two-target compare of each pair, and only the much worse one may be marked.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-compare-3b1d"
QUERIES = [f"question {i:02d}" for i in range(30)]
SUITE = {
    "cases": [
        {
            "id": f"case-{i:02d}",
            "query": q,
            "relevant": {f"rel-{i}": 2, f"doc-{i}-0": 1},
            "tags": ["even" if i % 2 == 0 else "odd"],
        }
        for i, q in enumerate(QUERIES)
    ]
}
LOST = {"ref": set(), "equal": set(), "slight": {0, 1}, "much": set(range(15))}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A config of the four targets, each a retriever of its own."""
    tmp = tmp_path_factory.mktemp("compare")
    servers = {name: FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) for name in LOST}
    for name, server in servers.items():
        server.__enter__()
        server.drop_ids = {f"rel-{i}" for i in LOST[name]}
    try:
        targets = {
            name: target_entry(s.url, timeout="5s", retries=0) for name, s in servers.items()
        }
        core = {"cases": "suite.yaml", "targets": list(targets), "k": [1, 3, 5, 10], "depth": 10}
        (tmp / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        path = tmp / "ragcanary.yaml"
        body = {"targets": targets, "suites": {"core": core}}
        path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        yield path
    finally:
        for server in servers.values():
            server.__exit__(None, None, None)


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"VENDOR_KEY": API_KEY, "COLUMNS": "200"})
    assert API_KEY not in result.output
    return result


def _compare(config: Path, out: Path, *targets: str, extra: tuple[str, ...] = ()) -> Any:
    report = out / "comparison.json"
    result = _invoke(
        "compare", "-c", str(config), "--suite", "core", *targets, "--report", str(report), *extra
    )
    return result, (json.loads(report.read_text()) if report.exists() else None)


@pytest.fixture(scope="module")
def several(
    config: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("several")
    extra = ("--markdown", str(out / "compare.md"), "--junit", str(out / "compare.xml"))
    result, data = _compare(config, out, "ref", "equal", "slight", "much", extra=extra)
    return result, data, out


def test_the_much_worse_target_fails_the_comparison_by_name(several) -> None:
    result, data, _ = several
    assert result.exit_code == 1, result.output
    assert "much is significantly worse than ref" in result.output
    assert "equal is not significantly worse than ref" in result.output
    assert "slight is not significantly worse than ref" in result.output
    assert "Holm" in result.output
    assert data["reference"] == "ref"
    assert data["correction"] == "holm"
    much, equal, slight = (data["targets"][n] for n in ("much", "equal", "slight"))
    assert much["worse"] is True
    assert "ndcg@10" in much["significant"]
    assert equal["worse"] is False
    assert equal["significant"] == []
    assert slight["worse"] is False
    assert slight["significant"] == []


def test_each_target_s_values_equal_its_own_run(several, config: Path) -> None:
    _, data, out = several
    for name in LOST:
        path = out / f"run-{name}.json"
        result = _invoke("run", "-c", str(config), "--target", name, "--report", str(path))
        assert result.exit_code == 0, result.output
        own = json.loads(path.read_text())
        shown = data["targets"][name]
        assert shown["coverage"] == own["coverage"]
        assert shown["metrics"].keys() == own["metrics"].keys()
        for metric, value in own["metrics"].items():
            assert shown["metrics"][metric] == pytest.approx(value, abs=1e-12)
        for tag, values in own["metrics_by_tag"].items():
            for metric, value in values.items():
                assert data["tags"][tag][name]["metrics"][metric] == pytest.approx(value, abs=1e-12)
        latencies = sorted(c["latency_s"] for c in own["cases"])
        assert 0 < shown["latency_p50_s"] <= shown["latency_p95_s"] < 5
        assert latencies  # the run answered; the comparison measured its own latencies


def test_p_values_before_correction_equal_the_two_target_compare(several, config: Path) -> None:
    _, data, out = several
    for name in ("equal", "slight", "much"):
        pair = out / name
        pair.mkdir(exist_ok=True)
        result, two = _compare(config, pair, "ref", name)
        # Two targets keep the A/B verdict: on a deterministic target (every kept result has
        # its exact score) two canaries that dropped fail it even though p is 0.5.
        assert result.exit_code == (0 if name == "equal" else 1), result.output
        assert "win/tie/loss" in result.output  # the A/B view of two targets stays
        mine, theirs = data["targets"][name], two["targets"][name]
        assert mine["p_values"] == theirs["p_values"]
        assert mine["deltas"] == theirs["deltas"]
        # One candidate: the correction changes nothing.
        assert theirs["p_values_corrected"] == theirs["p_values"]


def test_equal_target_is_never_marked_in_any_scope(several) -> None:
    _, data, _ = several
    equal = data["targets"]["equal"]
    assert set(equal["p_values"].values()) == {1.0}
    assert set(equal["deltas"].values()) == {0.0}
    for tag in data["tags"].values():
        assert tag["equal"]["significant"] == []


def test_markdown_and_junit_name_the_worse_target(several) -> None:
    _, _, out = several
    markdown = (out / "compare.md").read_text()
    assert "much is significantly worse than ref" in markdown
    assert "Holm" in markdown
    assert "<details><summary>tag even</summary>" in markdown
    root = ET.parse(out / "compare.xml").getroot()
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["much vs ref"]


def test_baseline_target_picks_the_reference(config: Path, tmp_path: Path) -> None:
    result, data = _compare(config, tmp_path, "much", "ref", extra=("--baseline-target", "ref"))
    assert result.exit_code == 1, result.output
    assert data["reference"] == "ref"
    assert list(data["targets"]) == ["ref", "much"]
    assert data["targets"]["much"]["worse"] is True


@pytest.mark.parametrize("count", [1, 11])
def test_fewer_than_two_or_more_than_ten_targets_is_a_usage_error(config: Path, count: int) -> None:
    result = _invoke("compare", "-c", str(config), "--suite", "core", *(["ref"] * count))
    assert result.exit_code == 2, result.output
    assert "2 to 10 targets" in result.output


def test_an_unknown_reference_is_a_usage_error(config: Path) -> None:
    args = ("--suite", "core", "ref", "much", "--baseline-target", "nope")
    result = _invoke("compare", "-c", str(config), *args)
    assert result.exit_code == 2
    assert "--baseline-target nope" in result.output
