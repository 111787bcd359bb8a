"""`ragcanary export RUN --format trec`: trec_eval (pytrec_eval) and ir_measures reproduce the
report's numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from factories import case_entry, run_report
from retrievers import FakeRetriever, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.reports.trec import qrels_file, run_file
from ragcanary.serve.daemon import Daemon, JobKey
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import load_config

API_KEY = "sk-trec-export-31f"
QUERIES = [f"query {i}" for i in range(12)]
# Graded labels, ties in the target's scores, a duplicate id, a relevant id never retrieved,
# ids judged not relevant (grade 0; a relevant grade of the same id wins) and unjudged ids.
CORPUS = {
    q: [(f"d{i}-{j}", round(0.9 - 0.1 * (j // 2), 3)) for j in range(8)] + [(f"d{i}-1", 0.1)]
    for i, q in enumerate(QUERIES)
}
CASES = [
    {
        "id": f"c{i}",
        "query": q,
        "relevant": {
            f"d{i}-{(i + 5) % 8}": 0,
            f"d{i}-{(i * 3) % 8}": 2,
            f"d{i}-{i % 5}": 1,
            "gone": 1,
            "judged-elsewhere": 0,
        },
    }
    for i, q in enumerate(QUERIES)
] + [
    {"id": "negative", "query": "query 0", "relevant": [], "max_score": 2.0},
    {"id": "free", "query": "query 1"},
]
MEASURES = {
    "P_1,3,5",
    "recall_1,3,5",
    "ndcg_cut_1,3,5",
    "recip_rank",
    "success_1,3,5",
    "map_cut_1,3,5",
    "bpref",
}
JUDGED = [ir_measures.Judged @ k for k in (1, 3, 5)]
OURS = {
    "P": "precision",
    "recall": "recall",
    "ndcg_cut": "ndcg",
    "success": "hit_rate",
    "map_cut": "ap",
}


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "suite.json").write_text(json.dumps({"cases": CASES}), encoding="utf-8")
    config = tmp_path / "ragcanary.yaml"
    config.write_text(
        json.dumps(
            {
                "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
                "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query", retries=0)},
                "suites": {
                    "core": {
                        "cases": "suite.json",
                        "targets": ["vendor"],
                        "k": [1, 3, 5],
                        "depth": 8,
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    with FakeRetriever(corpus=CORPUS, api_key=API_KEY) as retriever:
        text = config.read_text().replace("http://127.0.0.1:9/v2/query", retriever.url)
        config.write_text(text, encoding="utf-8")
        environ = {"VENDOR_KEY": API_KEY}

        async def one_run() -> str:
            daemon = Daemon(config, environ, load_config(config, environ))
            try:
                return (await daemon.run_now(JobKey("core", "vendor"))).run_id
            finally:
                await daemon.shutdown()

        return config, asyncio.run(one_run())


def test_trec_eval_on_the_export_gives_the_reports_numbers(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    config, run_id = stored
    out = tmp_path / "export"
    result = CliRunner().invoke(
        app, ["export", run_id, "--format", "trec", "--out", str(out), "-c", str(config)]
    )
    assert result.exit_code == 0, result.output
    run_lines = (out / f"{run_id}.run").read_text().splitlines()
    qrels_lines = (out / "core.qrels").read_text().splitlines()
    run = {}
    for line in run_lines:
        qid, _q0, doc, _rank, score, _tag = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    qrels = {}
    for line in qrels_lines:
        qid, _zero, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    assert set(qrels) == {f"c{i}" for i in range(12)}  # negative and label-free have no labels
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    with Store.from_url(f"sqlite:///{config.parent / 'ragcanary.db'}") as store:
        report = store.get_report(run_id)
    assert report is not None
    cases = {c.id: c for c in report.cases}
    for qid, values in evaluated.items():
        ours = cases[qid].metrics
        assert abs(values["recip_rank"] - ours["rr"]) <= 1e-9
        assert abs(values["bpref"] - ours["bpref"]) <= 1e-9, qid
        for name, value in values.items():
            measure, _, k = name.rpartition("_")
            if measure in OURS:
                assert abs(value - ours[f"{OURS[measure]}@{k}"]) <= 1e-9, (qid, name)
    judged = list(ir_measures.iter_calc(JUDGED, qrels, run))
    assert {m.query_id for m in judged} == set(qrels)
    for metric in judged:
        expected = metric.value
        assert (
            abs(cases[metric.query_id].metrics[f"judged@{metric.measure['cutoff']}"] - expected)
            <= 1e-9
        )
    mean_rr = sum(v["recip_rank"] for v in evaluated.values()) / len(evaluated)
    mrr = report.metrics["mrr"]
    assert mrr is not None
    assert abs(mean_rr - mrr) <= 1e-9


def test_the_run_file_keeps_the_targets_order_through_ties_and_duplicates() -> None:
    report = run_report(
        cases=[
            case_entry("q", ids=["b", "a", "b", "c"], scores=[0.5, 0.5, 0.5, 0.9]),
            case_entry("x", outcome="timeout", error="timeout"),
        ]
    )
    assert run_file(report) == "q Q0 b 1 3 ragcanary\nq Q0 a 2 2 ragcanary\nq Q0 c 3 1 ragcanary\n"


def test_white_space_in_an_id_is_refused_with_the_reason() -> None:
    from ragcanary.measure.cases import Case

    with pytest.raises(ValueError, match="white space"):
        qrels_file([Case(id="has space", query="q", relevant={"d": 1})])
