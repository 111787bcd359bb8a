"""`ragcanary run`, `validate` and `compare` end to end, against a real retriever on 127.0.0.1.

The retriever's API is not the README's example: hits live under ``data.matches``, ids
are nested in ``chunk.meta.parent_id`` and an API key comes from the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval
import typer
import yaml
from retrievers import EmbeddingServer, FakeRetriever, graded_corpus, target_entry, toy_vector
from terminal import in_a_terminal
from typer.testing import CliRunner

from ragcanary.cli.app import app

API_KEY = "sk-live-7f3a9c1e5b"
QUERIES = [f"question {i:02d}" for i in range(30)]


SUITE = {
    "cases": [
        {"id": f"case-{i:02d}", "query": q, "relevant": {f"rel-{i}": 2, f"doc-{i}-0": 1}}
        for i, q in enumerate(QUERIES)
    ]
    + [{"id": "label-free", "query": QUERIES[0]}]
}


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _write_config(tmp_path: Path, url: str, worse_url: str | None = None) -> Path:
    """A config for the retriever at ``url`` (target vendor) and, if given, ``worse_url``."""
    targets = {"vendor": target_entry(url, timeout="2s", retries=0)}
    if worse_url:
        targets["worse"] = target_entry(worse_url)
    core = {
        "cases": "suite.yaml",
        "targets": list(targets),
        "k": [1, 3, 5, 10],
        "depth": 10,
        "thresholds": {"max_drop": 0.02},
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    config = {"targets": targets, "suites": {"core": core}}
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"VENDOR_KEY": API_KEY, "COLUMNS": "200"})
    assert API_KEY not in result.output
    return result


def _trec_eval(run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    qrels = {
        c["id"]: {doc: grade for doc, grade in c["relevant"].items()}
        for c in SUITE["cases"]
        if "relevant" in c
    }
    trec_run = {
        case: {doc: float(len(ids) - r) for r, doc in enumerate(ids)}
        for case, ids in run.items()
        if case in qrels
    }
    measures = {
        "P_1,3,5,10",
        "recall_1,3,5,10",
        "ndcg_cut_1,3,5,10",
        "recip_rank",
        "success_1,3,5,10",
    }
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)  # type: ignore[no-any-return]


def test_run_reports_exactly_what_was_served_and_equals_trec_eval(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    config = _write_config(tmp_path, retriever.url)
    out = tmp_path / "out"
    out.mkdir()
    result = _invoke(
        "run",
        "-c",
        str(config),
        "--report",
        str(out / "report.json"),
        "--junit",
        str(out / "junit.xml"),
        "--markdown",
        str(out / "summary.md"),
    )
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["outcome"] == "ok"
    assert report["coverage"] == 1.0
    assert report["duration_s"] > 0
    for case in report["cases"]:
        served = retriever.ranked(case["query"], 10)
        assert case["ids"] == [doc for doc, _ in served]
        assert case["scores"] == [score for _, score in served]
    reference = _trec_eval({c["id"]: c["ids"] for c in report["cases"]})
    names = {
        "P_": "precision@",
        "recall_": "recall@",
        "ndcg_cut_": "ndcg@",
        "success_": "hit_rate@",
    }
    for case in report["cases"]:
        if case["id"] not in reference:
            assert case["metrics"] == {}
            continue
        expected = reference[case["id"]]
        assert abs(case["metrics"]["rr"] - expected["recip_rank"]) < 1e-9
        for prefix, name in names.items():
            for k in (1, 3, 5, 10):
                assert abs(case["metrics"][f"{name}{k}"] - expected[f"{prefix}{k}"]) < 1e-9
    assert all(r.headers.get("X-Api-Key") == API_KEY for r in retriever.requests)
    assert all(r.body["top_k"] == 10 for r in retriever.requests)
    suites = ET.parse(out / "junit.xml").getroot()
    assert suites.get("tests") == str(len(SUITE["cases"]) + 1)
    assert "pass" in (out / "summary.md").read_text()
    for name in ("report.json", "junit.xml", "summary.md"):
        assert API_KEY not in (out / name).read_text()


def test_unchanged_retriever_passes_against_its_own_baseline(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    config = _write_config(tmp_path, retriever.url)
    baseline = tmp_path / "baseline.json"
    assert _invoke("run", "-c", str(config), "--report", str(baseline)).exit_code == 0
    result = _invoke(
        "run",
        "-c",
        str(config),
        "--baseline",
        str(baseline),
        "--report",
        str(tmp_path / "now.json"),
    )
    assert result.exit_code == 0, result.output
    now = json.loads((tmp_path / "now.json").read_text())
    assert now["baseline"]["rank_overlap"] == 1.0
    assert now["baseline"]["score_drift"] == 0.0
    assert all(delta == 0.0 for delta in now["baseline"]["deltas"].values())
    assert now["regressions"] == []


def test_removing_relevant_documents_exits_1_with_regressions_listed(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    config = _write_config(tmp_path, retriever.url)
    baseline = tmp_path / "baseline.json"
    assert _invoke("run", "-c", str(config), "--report", str(baseline)).exit_code == 0
    # 40% of the queries lose every relevant document.
    retriever.drop_ids = {f"rel-{i}" for i in range(12)} | {f"doc-{i}-0" for i in range(12)}
    report_path = tmp_path / "after.json"
    result = _invoke(
        "run", "-c", str(config), "--baseline", str(baseline), "--report", str(report_path)
    )
    assert result.exit_code == 1, result.output
    assert "REGRESSION" in result.output
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "regression"
    regressed = {r["case"] for r in report["regressions"]}
    assert regressed == {f"case-{i:02d}" for i in range(12)}
    assert report["baseline"]["deltas"]["hit_rate@5"] == pytest.approx(-0.4)
    assert report["baseline"]["p_values"]["hit_rate@5"] < 0.001
    assert any(f["kind"] == "drop" and f["metric"] == "hit_rate@5" for f in report["failures"])


def test_outage_exits_3_unavailable_not_regression(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    config = _write_config(tmp_path, retriever.url)
    retriever.status = 503
    report_path = tmp_path / "report.json"
    result = _invoke("run", "-c", str(config), "--report", str(report_path))
    assert result.exit_code == 3, result.output
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "unavailable"
    assert report["coverage"] == 0.0
    assert report["metrics"] == {}
    assert report["counts"]["outcomes"]["http_5xx"] == len(SUITE["cases"])
    assert report["diagnosis"]["cause"] == "outage"
    assert "cause outage: " in result.output


@pytest.mark.parametrize(
    ("field", "path", "says"),
    [
        pytest.param(
            "results",
            "hit",
            "targets.vendor.results: 'hit' matched nothing in the 31 answers that came back "
            "(HTTP 2xx); they hold the keys data",
            id="results",
        ),
        pytest.param(
            "id",
            "doc_id",
            "targets.vendor.id: 'doc_id' matched nothing in the hits of the 31 answers that "
            "came back (HTTP 2xx); they hold the keys chunk, relevance",
            id="id",
        ),
    ],
)
def test_paths_that_match_nothing_in_any_answer_exit_2_naming_the_keys_present(
    tmp_path: Path, retriever: FakeRetriever, field: str, path: str, says: str
) -> None:
    """Issue 34 item 7: a config mistake is no outage (exit 3) but a config error (exit 2)."""
    config = _write_config(tmp_path, retriever.url)
    data = yaml.safe_load(config.read_text())
    data["targets"]["vendor"][field] = path
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    report_path = tmp_path / "report.json"
    result = _invoke("run", "-c", str(config), "--report", str(report_path))
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    lines = enumerate(config.read_text().splitlines(), 1)
    line = next(n for n, text in lines if text.strip().startswith(f"{field}:"))
    assert f"({config} line {line})" in " ".join(result.output.split())
    assert "UNAVAILABLE" not in result.output
    assert "did not answer enough queries" not in result.output
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "unavailable"  # no quality verdict, as for an outage
    assert [f["kind"] for f in report["failures"]] == ["config"]
    assert says in report["failures"][0]["message"]
    assert report["counts"]["outcomes"]["bad_response"] == len(SUITE["cases"])
    assert report["diagnosis"]["cause"] == "config"
    assert "cause config: " in result.output


def test_bad_duration_exits_2_naming_the_field(tmp_path: Path) -> None:
    config = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    lines = config.read_text().replace("timeout: 2s", "timeout: 2 minutes-ish").splitlines()
    config.write_text("\n".join(lines) + "\n")
    line = next(n for n, text in enumerate(lines, 1) if "timeout:" in text)
    for command in ("run", "validate"):
        result = _invoke(command, "-c", str(config))
        assert result.exit_code == 2
        assert "targets.vendor.timeout" in result.output
        assert f"line {line}" in result.output
        assert "30s" in result.output


def test_missing_suite_file_exits_2_naming_the_file(tmp_path: Path) -> None:
    config = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    (tmp_path / "suite.yaml").unlink()
    result = _invoke("validate", "-c", str(config))
    assert result.exit_code == 2
    assert "suite.yaml" in result.output
    assert "suites.core.cases" in result.output


def test_validate_passes_a_good_config(tmp_path: Path) -> None:
    config = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    result = _invoke("validate", "-c", str(config))
    assert result.exit_code == 0, result.output
    assert "31 cases" in result.output


def test_compare_exits_1_when_b_is_clearly_worse(tmp_path: Path, retriever: FakeRetriever) -> None:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as worse:
        worse.drop_ids = {f"rel-{i}" for i in range(15)}
        config = _write_config(tmp_path, retriever.url, worse.url)
        result = _invoke("compare", "-c", str(config), "--suite", "core", "vendor", "worse")
        assert result.exit_code == 1, result.output
        assert "win/tie/loss" in result.output
        same = _invoke("compare", "-c", str(config), "--suite", "core", "vendor", "vendor")
        assert same.exit_code == 0, same.output


def test_a_distance_target_judges_its_canaries_with_lower_is_better(tmp_path: Path) -> None:
    """score_order: asc: a far negative canary passes, a close one leaks; distances are kept."""
    far = [("cake-1", 0.52), ("cake-2", 0.61)]
    corpus = {
        "reset my password": [("doc-reset", 0.08), ("doc-login", 0.31)],
        "best sourdough bread recipe": far,
    }
    suite = {
        "cases": [
            {"id": "reset", "query": "reset my password", "relevant": ["doc-reset"]},
            {"id": "bread", "query": "best sourdough bread recipe", "relevant": []},
        ]
    }
    for case in suite["cases"]:
        case.update({"min_score": 0.2} if case["id"] == "reset" else {"max_score": 0.3})
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    with FakeRetriever(corpus=corpus, api_key=API_KEY) as fake:
        target = target_entry(fake.url, retries=0, score_order="asc")
        config = tmp_path / "ragcanary.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "targets": {"vendor": target},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"], "k": [1]}},
                }
            ),
            encoding="utf-8",
        )
        report_path = tmp_path / "far.json"
        result = _invoke("run", "-c", str(config), "--report", str(report_path))
        assert result.exit_code == 0, result.output
        far_report = json.loads(report_path.read_text())
        assert far_report["failures"] == []
        assert far_report["cases"][1]["scores"] == [0.52, 0.61]  # as the target returned them

        fake.corpus = {**corpus, "best sourdough bread recipe": [("cake-1", 0.12)]}
        result = _invoke("run", "-c", str(config), "--report", str(report_path))
    assert result.exit_code == 1, result.output
    (failure,) = json.loads(report_path.read_text())["failures"]
    assert failure["kind"] == "negative_leak"
    assert "0.12, at or below max_score 0.3 (a distance)" in failure["message"]


def test_an_embedding_target_gets_each_query_vector_and_an_embedding_outage_is_unavailable(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """Queries are embedded in batches first; the target gets "{vector}"; an outage is exit 3."""
    with EmbeddingServer(api_key="emb-key-5c2d") as embedder:
        target = target_entry(retriever.url, retries=0, embedding="toy")
        target["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
        config = tmp_path / "ragcanary.yaml"
        (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        embedding = {
            "url": embedder.url,
            "model": "toy-1",
            "headers": {"Authorization": "Bearer ${EMBED_KEY}"},
            "batch": 8,
            "retries": 0,
        }
        config.write_text(
            yaml.safe_dump(
                {
                    "embeddings": {"toy": embedding},
                    "targets": {"vendor": target},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"]}},
                }
            ),
            encoding="utf-8",
        )
        env = {"VENDOR_KEY": API_KEY, "EMBED_KEY": "emb-key-5c2d", "COLUMNS": "200"}
        report_path = tmp_path / "report.json"
        args = ["run", "-c", str(config), "--report", str(report_path)]
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 0, result.output
        # 30 distinct queries (the label-free case repeats one) in batches of 8.
        assert [len(body["input"]) for body in embedder.requests] == [8, 8, 8, 6]
        sent = {r.body["text"]: r.body["vector"] for r in retriever.requests}
        assert sent == {q: toy_vector(q, 8) for q in QUERIES}
        assert json.loads(report_path.read_text())["metrics"]["hit_rate@10"] == 1.0

        embedder.status = 503
        asked = len(retriever.requests)
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 3, result.output
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "unavailable"
    assert report["counts"]["outcomes"]["embedding_error"] == len(SUITE["cases"])
    assert len(retriever.requests) == asked  # a query without its vector is never sent
    assert "embedding toy: HTTP 503" in report["cases"][0]["error"]
    assert "emb-key-5c2d" not in result.output + report_path.read_text()


def test_an_embedding_endpoint_answering_json_nested_too_deep_is_an_embedding_error(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """Issue 34 item 9: the decoder's RecursionError is the endpoint's fault, not a crash."""
    with EmbeddingServer(raw=b"[" * 100_000 + b"]" * 100_000) as embedder:
        target = target_entry(retriever.url, retries=0, embedding="toy")
        target["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
        (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        config = tmp_path / "ragcanary.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "embeddings": {"toy": {"url": embedder.url, "model": "toy-1", "retries": 0}},
                    "targets": {"vendor": target},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"]}},
                }
            ),
            encoding="utf-8",
        )
        report_path = tmp_path / "report.json"
        result = _invoke("run", "-c", str(config), "--report", str(report_path))
    assert result.exit_code == 3, result.output
    report = json.loads(report_path.read_text())
    assert report["outcome"] == "unavailable"
    assert report["coverage"] == 0.0
    assert report["counts"]["outcomes"]["embedding_error"] == len(SUITE["cases"])
    assert retriever.requests == []  # a query without its vector is never sent
    assert "nested deeper than the JSON decoder follows" in report["cases"][0]["error"]


def test_a_new_model_behind_the_embedding_endpoint_is_embedding_drift(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """Against a baseline report, the same model is no drift; a swapped one, a new size, are."""
    with EmbeddingServer() as embedder:
        target = target_entry(retriever.url, retries=0, embedding="toy")
        target["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
        config = tmp_path / "ragcanary.yaml"
        (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        config.write_text(
            yaml.safe_dump(
                {
                    "embeddings": {"toy": {"url": embedder.url, "model": "toy-1"}},
                    "targets": {"vendor": target},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"]}},
                }
            ),
            encoding="utf-8",
        )
        env = {"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
        base, current = tmp_path / "base.json", tmp_path / "current.json"

        def run_against_base() -> dict[str, Any]:
            args = ["run", "-c", str(config), "--baseline", str(base), "--report", str(current)]
            result = CliRunner().invoke(app, args, env=env)
            assert result.exit_code == 0, result.output  # the ranking did not change
            return {**json.loads(current.read_text())["baseline"], "output": result.output}

        result = CliRunner().invoke(app, ["run", "-c", str(config), "--report", str(base)], env=env)
        assert result.exit_code == 0, result.output
        same = run_against_base()
        embedder.model = "toy-2"
        swapped = run_against_base()
        embedder.dimensions = 16
        resized = run_against_base()
    assert same["embedding_drift"] < 1e-6
    assert same["embedding_changed_ratio"] == 0.0
    assert swapped["embedding_drift"] > 0.5
    assert swapped["embedding_changed_ratio"] == 1.0
    assert swapped["embedding_dimensions"] is None
    assert resized["embedding_dimensions"] == {"baseline": 8, "current": 16}
    assert resized["embedding_drift"] == 1.0
    assert swapped["rank_overlap"] == 1.0  # the index answered as before: only vectors moved
    assert "100% of query vectors moved" in swapped["output"]
    assert "embedding dimensions changed 8 → 16" in resized["output"]


@pytest.mark.parametrize(
    ("key", "embedding_status", "code", "says"),
    [
        pytest.param(API_KEY, 200, 0, "vendor: ok (ok,", id="ok"),
        pytest.param("wrong-key", 200, 2, "vendor: config (http_4xx,", id="wrong-target-key"),
        pytest.param(API_KEY, 401, 2, "vendor: config (embedding_error,", id="embedding-refused"),
        pytest.param(API_KEY, 503, 3, "vendor: unreachable (embedding_error,", id="embedding-down"),
    ],
)
def test_validate_live_tells_a_wrong_config_from_a_down_service(
    tmp_path: Path, retriever: FakeRetriever, key: str, embedding_status: int, code: int, says: str
) -> None:
    with EmbeddingServer(status=embedding_status) as embedder:
        target = target_entry(retriever.url, retries=0, embedding="toy")
        target["body"] = {"text": "{query}", "top_k": "{k}", "vector": "{vector}"}
        (tmp_path / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
        config = tmp_path / "ragcanary.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "embeddings": {"toy": {"url": embedder.url, "model": "m", "retries": 0}},
                    "targets": {"vendor": target},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"]}},
                }
            ),
            encoding="utf-8",
        )
        result = CliRunner().invoke(
            app,
            ["validate", "--live", "-c", str(config)],
            env={"VENDOR_KEY": key, "COLUMNS": "300"},
        )
    assert result.exit_code == code, result.output
    assert says in result.output
    assert key not in result.output
    if code == 0:
        assert f"query: {QUERIES[0]}" in result.output
        assert "1. rel-0  0.95" in result.output


def test_the_run_path_leaves_sqlalchemy_to_pgvector_targets() -> None:
    """`run` gates deploys, so its start-up counts: importing SQLAlchemy took a fifth of it.

    A fresh interpreter, because this test process imported SQLAlchemy long ago.
    """
    probe = (
        "import sys, ragcanary.cli.app, ragcanary.cli.cycles;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')[:3])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_command_s_parameters_are_typed_with_objects_not_strings() -> None:
    """typer reads every command's parameters each time any command starts; annotations left
    as strings (``from __future__ import annotations``) cost 30 ms of each start to evaluate."""

    def commands(group: typer.Typer) -> Iterator[Any]:
        yield from (info.callback for info in group.registered_commands)
        for sub in group.registered_groups:
            assert sub.typer_instance is not None
            yield from commands(sub.typer_instance)

    found = list(commands(app))
    assert len(found) > 10, found
    for callback in found:
        as_text = [n for n, a in callback.__annotations__.items() if isinstance(a, str)]
        assert as_text == [], f"{callback.__name__}: {as_text}"


def test_run_on_a_terminal_shows_progress_and_in_a_pipe_does_not(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """An engineer at a terminal sees each pair's progress; a CI log gets no bar to scroll."""
    config = _write_config(tmp_path, retriever.url)
    code, shown = in_a_terminal(["run", "-c", str(config)], tmp_path, {"VENDOR_KEY": API_KEY})
    assert code == 0, shown
    assert "core → vendor" in shown
    assert f"{len(SUITE['cases'])}/{len(SUITE['cases'])}" in shown
    piped = subprocess.run(
        [sys.executable, "-m", "ragcanary", "run", "-c", str(config)],
        cwd=tmp_path,
        env={**os.environ, "VENDOR_KEY": API_KEY, "TERM": "xterm-256color"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert "core → vendor" not in piped.stdout + piped.stderr


_WATCHED_RUN = """
import atexit, gc, json, sys
from ragcanary.__main__ import main
first = []
def watch(phase, info):
    if phase == "start" and not first:
        first.append(sorted(m for m in ("aiohttp", "ragcanary.probe.runner") if m in sys.modules))
gc.callbacks.append(watch)
atexit.register(lambda: print(json.dumps({
    "first_collection_saw": first[0] if first else None,
    "frozen": gc.get_freeze_count(),
    "enabled": gc.isenabled(),
    "unfrozen": len(gc.get_objects()),
})))
sys.argv = ["ragcanary", *sys.argv[1:]]
main()
"""


def test_no_collection_runs_until_the_command_imported_what_it_needs(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """Start-up's objects all outlive the command: the collector waits for the work to begin,
    and then and at exit leaves them frozen (gc.freeze) rather than visiting them again."""
    config = _write_config(tmp_path, retriever.url)
    done = subprocess.run(
        [sys.executable, "-c", _WATCHED_RUN, "run", "-c", str(config), "--report", "r.json"],
        cwd=tmp_path,
        env={**os.environ, "VENDOR_KEY": API_KEY},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["coverage"] == 1.0
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["first_collection_saw"] in (None, ["aiohttp", "ragcanary.probe.runner"])
    assert seen["frozen"] > 10_000
    assert seen["enabled"] is True
    assert seen["unfrozen"] < 100  # what the atexit hook made: the rest was frozen on exit
