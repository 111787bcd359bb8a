"""Index-side noise: scores perturbed once and lists re-sorted must read as the drop it is.

A real retriever on 127.0.0.1 first serves a clean index, then one whose document vectors got
gaussian noise: every (query, document) score moves by a fixed random amount and each list is
re-sorted by the noisy score, as a re-embedded or corrupted index would answer from then on.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml
from retrievers import FakeRetriever, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-index-noise-4d1"
QUERIES = [f"query {i:02d}" for i in range(40)]
SIGMA = 0.05


def clean_index() -> dict[str, list[tuple[str, float]]]:
    """Per query: the relevant document first, then nine others, 0.02 apart in score."""
    index = {}
    for i, query in enumerate(QUERIES):
        docs = [f"rel-{i}", *(f"doc-{i}-{j}" for j in range(9))]
        index[query] = [(doc, round(0.9 - 0.02 * rank, 6)) for rank, doc in enumerate(docs)]
    return index


def noisy_index(seed: int) -> dict[str, list[tuple[str, float]]]:
    """The clean index with every score moved by N(0, SIGMA) once, each list re-sorted."""
    rng = random.Random(seed)
    noisy = {}
    for query, hits in clean_index().items():
        moved = [(doc, round(score + rng.gauss(0.0, SIGMA), 6)) for doc, score in hits]
        noisy[query] = sorted(moved, key=lambda hit: -hit[1])
    return noisy


def _config(tmp_path: Path, url: str) -> Path:
    suite = {
        "cases": [
            {"id": f"case-{i:02d}", "query": q, "relevant": [f"rel-{i}"]}
            for i, q in enumerate(QUERIES)
        ]
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    config = {
        "targets": {"vendor": target_entry(url, retries=0)},
        "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"], "k": [1, 3, 5, 10]}},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args], env={"VENDOR_KEY": API_KEY})


def test_index_noise_that_lowers_mrr_is_a_regression_with_exact_deltas(tmp_path: Path) -> None:
    with FakeRetriever(corpus=clean_index(), api_key=API_KEY) as retriever:
        config = _config(tmp_path, retriever.url)
        baseline_file, current_file = tmp_path / "baseline.json", tmp_path / "current.json"
        assert _run("-c", str(config), "--report", str(baseline_file)).exit_code == 0
        retriever.corpus = noisy_index(seed=7)
        result = _run(
            "-c", str(config), "--baseline", str(baseline_file), "--report", str(current_file)
        )
    baseline = json.loads(baseline_file.read_text(encoding="utf-8"))
    current = json.loads(current_file.read_text(encoding="utf-8"))
    drop = baseline["metrics"]["mrr"] - current["metrics"]["mrr"]
    assert drop >= 0.08, f"the noisy index must lower MRR by 0.08 or more, not {drop:.4f}"
    assert result.exit_code == 1, result.output
    assert current["outcome"] == "regression"
    assert any(f["kind"] == "drop" and f["metric"] == "mrr" for f in current["failures"])
    deltas = current["baseline"]["deltas"]
    assert set(deltas) == set(current["metrics"])
    for metric, delta in deltas.items():
        assert abs(delta - (current["metrics"][metric] - baseline["metrics"][metric])) <= 1e-12
