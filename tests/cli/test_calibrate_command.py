"""`ragcanary calibrate`: runs an unchanged retriever, prints its noise and thresholds to set."""

from __future__ import annotations

import json
from pathlib import Path

from retrievers import FakeRetriever, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-calibrate-8a61c0"

CONFIG = """\
storage: sqlite:///{db}
targets: {targets}
suites:
  core:
    cases: suite.yaml
    targets: [vendor]
    k: [1, 3]
    depth: 5
"""

COMMAND_SUITE = {
    "cases": [
        {"id": "password", "query": "reset password", "relevant": ["doc-7"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"]},
    ]
}


def _config(tmp_path: Path, url: str) -> Path:
    (tmp_path / "suite.yaml").write_text(json.dumps(COMMAND_SUITE), encoding="utf-8")
    config = tmp_path / "ragcanary.yaml"
    config.write_text(
        CONFIG.format(
            db=tmp_path / "ragcanary.db",
            targets=json.dumps({"vendor": target_entry(url, retries=0)}),
        ),
        encoding="utf-8",
    )
    return config


def _calibrate(config: Path, runs: str) -> tuple[int, str]:
    args = ["calibrate", "-c", str(config), "--suite", "core", "--target", "vendor"]
    result = CliRunner().invoke(
        app, [*args, "--runs", runs], env={"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
    )
    assert API_KEY not in result.output
    return result.exit_code, result.output


def test_calibrate_command_prints_noise_and_suggestions(tmp_path: Path) -> None:
    with FakeRetriever(api_key=API_KEY) as retriever:
        code, out = _calibrate(_config(tmp_path, retriever.url), "3")
    assert code == 0, out
    assert len(retriever.requests) == 3 * len(COMMAND_SUITE["cases"])
    assert "run 3/3: coverage 100%" in out
    assert "noise over 3 runs of core on vendor" in out
    assert "hit_rate@1" in out
    assert "suggested thresholds (suites.core.thresholds):" in out
    suggestions = [line.split() for line in out.splitlines() if line.startswith("  ")]
    assert suggestions == [
        ["max_drop:", "0.01"],
        ["score_drift:", "0.01"],
        ["min_rank_overlap:", "0.9"],
    ]


def test_calibrate_needs_at_least_two_runs(tmp_path: Path) -> None:
    code, out = _calibrate(_config(tmp_path, "http://127.0.0.1:9/v2/query"), "1")
    assert code == 2
    assert "--runs" in out
