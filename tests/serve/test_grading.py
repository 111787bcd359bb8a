"""Judgments in the daemon: which ids a run sends its judge, the background grading (cached,
bounded, failures counted and never raised), review through the API, and the agreement."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from factories import case_entry, run_report

from ragcanary.config.judges import JudgeConfig
from ragcanary.measure.agreement import cohen_kappa
from ragcanary.measure.cases import Case, Suite
from ragcanary.serve.daemon import Daemon
from ragcanary.serve.grading import review
from ragcanary.serve.grading.wanted import entered_unlabelled
from ragcanary.serve.grading.worker import Grading, Job
from ragcanary.serve.http.api import create_app
from ragcanary.serve.metrics.exporter import Exporter
from ragcanary.store.judgments import JudgmentStore, Wanted
from ragcanary.store.keeper import RunKeeper
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
ADMIN = "adm-unit-9"
SUITE = """\
# The core suite.
cases:
  - id: c1  # first
    query: what is alpha
    relevant: [a]
  - id: c2
    query: what is beta
    relevant: {b: 2}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _vs(entered: list[str]) -> dict[str, Any]:
    return {"rbo": 0.5, "jaccard": 0.5, "entered": entered, "left": [], "top_score_delta": 0.0}


def test_only_unlabelled_ids_that_entered_a_labelled_canary_are_wanted() -> None:
    suite = Suite(
        (
            Case("c1", "what is alpha", {"a": 1, "z": 0}),
            Case("free", "no labels"),
            Case("neg", "off topic", {}, max_score=0.5),
            Case("moved", "the new query", {"m": 1}),
            Case("first", "first run", {"f": 1}),
        )
    )
    report = run_report(
        "r9",
        cases=[
            case_entry(
                "c1", query="what is alpha", ids=["x", "a", "z"], vs_baseline=_vs(["x", "a", "z"])
            ),
            case_entry(
                "free", query="no labels", kind="label_free", ids=["y"], vs_baseline=_vs(["y"])
            ),
            case_entry(
                "neg", query="off topic", kind="negative", ids=["n"], vs_baseline=_vs(["n"])
            ),
            case_entry("moved", query="the old query", ids=["o"], vs_baseline=_vs(["o"])),
            case_entry("first", query="first run", ids=["g"]),
            case_entry("gone", query="removed case", ids=["h"], vs_baseline=_vs(["h"])),
        ],
    )
    assert entered_unlabelled(report, suite) == [
        Wanted("core", "search", "c1", "x", "what is alpha", "r9")
    ]


def test_cohen_kappa_matches_the_textbook_example() -> None:
    """20 both relevant, 5 judge only, 10 people only, 15 neither: p_o 0.7, p_e 0.5, kappa 0.4."""
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    found = cohen_kappa(pairs)
    assert found.kappa == pytest.approx(0.4, abs=1e-12)
    assert (found.pairs, found.agreed, found.table) == (50, 35, (20, 5, 10, 15))
    assert cohen_kappa([(True, True), (True, True)]).kappa is None  # chance agreement is certain
    assert cohen_kappa([]).kappa is None
    assert cohen_kappa([(True, False), (False, True)]).kappa == pytest.approx(-1.0)


Handler = Callable[[httpx.Request], httpx.Response]


def _rerank(scores: dict[str, float], seen: list[dict[str, Any]]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        results = [
            {"index": i, "relevance_score": scores[text.split()[-1]]}
            for i, text in enumerate(body["documents"])
        ]
        return httpx.Response(200, json={"results": results})

    return handler


async def _grading(
    store: Store, handler: Handler, texts: dict[str, str] | None
) -> tuple[Grading, Exporter]:
    exporter = Exporter()
    exporter.load_judges(["j"])

    async def fetch(target: str, ids: list[str]) -> dict[str, str] | None:
        return None if texts is None else {i: texts[i] for i in ids if i in texts}

    grading = Grading(
        RunKeeper(store),
        exporter,
        fetch,
        client_factory=lambda config: httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        clock=lambda: NOW,
    )
    return grading, exporter


def _job(*docs: str, limit: int = 50, retries: int = 0) -> Job:
    config = JudgeConfig(
        kind="rerank",
        url="https://judge.test/rerank",
        model="m",
        max_per_run=limit,
        retries=retries,
    )
    wanted = tuple(Wanted("core", "search", "c1", d, "what is alpha", "r1") for d in docs)
    return Job("j", config, "search", "r1", wanted)


def _errors(exporter: Exporter, reason: str) -> float | None:
    return exporter.registry.get_sample_value(
        "ragcanary_judge_errors_total", {"judge": "j", "reason": reason}
    )


async def test_grading_proposes_grades_once_and_counts_what_it_could_not_grade(
    store: Store,
) -> None:
    seen: list[dict[str, Any]] = []
    texts = {"x": "doc x", "y": "doc y"}  # w has no text
    grading, exporter = await _grading(store, _rerank({"x": 0.9, "y": 0.1}, seen), texts)
    failed = await grading.grade(_job("x", "y", "w"))
    assert failed == {"no_text": 1}
    assert _errors(exporter, "no_text") == 1
    found = {j.doc_id: (j.state, j.grade) for j in JudgmentStore(store).find(None)}
    assert found == {"x": ("proposed", 3), "y": ("proposed", 0), "w": ("refused", None)}
    assert [b["documents"] for b in seen] == [["doc x", "doc y"]]
    assert exporter.registry.get_sample_value("ragcanary_judgments_pending") == 2
    # Asked again (the same ids entered the next run): nothing is sent.
    assert await grading.grade(_job("x", "y", "w")) == {}
    assert len(seen) == 1
    await grading.stop()


async def test_a_run_grades_at_most_max_per_run(store: Store) -> None:
    seen: list[dict[str, Any]] = []
    grading, _ = await _grading(
        store, _rerank({"a": 0.5, "b": 0.5, "c": 0.5}, seen), {d: f"t {d}" for d in "abc"}
    )
    await grading.grade(_job("a", "b", "c", limit=2))
    assert [len(b["documents"]) for b in seen] == [2]
    await grading.grade(_job("a", "b", "c", limit=2))
    assert [len(b["documents"]) for b in seen] == [2, 1]
    await grading.stop()


async def test_an_unreachable_judge_is_counted_and_asked_again_by_a_later_run(store: Store) -> None:
    calls = []

    def down(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503)

    grading, exporter = await _grading(store, down, {"x": "doc x"})
    assert await grading.grade(_job("x")) == {"http_5xx": 1}
    assert _errors(exporter, "http_5xx") == 1
    assert JudgmentStore(store).find(None) == []  # released: a later run asks again
    await grading.grade(_job("x"))
    assert len(calls) == 2
    await grading.stop()


async def test_a_judge_that_answers_another_shape_is_refused_for_good(store: Store) -> None:
    calls = []

    def odd(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, json={"data": []})

    grading, _exporter = await _grading(store, odd, {"x": "doc x"})
    assert await grading.grade(_job("x")) == {"bad_response": 1}
    (judgment,) = JudgmentStore(store).find(None)
    assert judgment.state == "refused"
    assert "results" in (judgment.note or "")
    await grading.grade(_job("x"))
    assert len(calls) == 1
    await grading.stop()


def _daemon_config(tmp_path: Path) -> Path:
    (tmp_path / "core.yaml").write_text(SUITE, encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(
        f"storage: sqlite:///{tmp_path / 'db.sqlite'}\n"
        f"admin_token: {ADMIN}\n"
        "judges:\n  j: {kind: rerank, url: 'http://127.0.0.1:9/rerank', model: m}\n"
        "targets:\n  search: {url: 'http://127.0.0.1:9/search', body: {q: '{query}'}}\n"
        "suites:\n  core: {cases: core.yaml, targets: [search], judge: j}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    path = _daemon_config(tmp_path)
    daemon = Daemon(path, {}, load_config(path, {}))
    daemon.store.migrate()
    yield daemon
    await daemon.shutdown()


def _propose(store: Store, *graded: tuple[str, str, int]) -> list[int]:
    found = JudgmentStore(store)
    wanted = [
        Wanted("core", "search", case, doc, f"what is {'alpha' if case == 'c1' else 'beta'}", "r1")
        for case, doc, _ in graded
    ]
    claimed = found.claim(wanted, "j", "fp", NOW, limit=10)
    for judgment, (_, _, grade) in zip(claimed, graded, strict=True):
        found.record(judgment.id, grade, None, None)
    return [j.id for j in claimed]


async def test_the_api_lists_accepts_and_rejects_with_the_admin_token(
    daemon: Daemon, tmp_path: Path
) -> None:
    x, y, z = _propose(daemon.store, ("c1", "x", 2), ("c2", "y", 0), ("c1", "b", 1))
    admin = {"Authorization": f"Bearer {ADMIN}"}
    transport = httpx.ASGITransport(create_app(daemon.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
        listed = (await api.get("/api/v1/judgments")).json()["judgments"]
        assert [r["doc_id"] for r in listed] == ["b", "y", "x"]
        assert (await api.get(f"/api/v1/judgments/{x}")).json()["grade"] == 2
        assert (await api.get("/api/v1/judgments/999")).status_code == 404
        assert (await api.post(f"/api/v1/judgments/{x}/accept")).status_code == 401
        accepted = await api.post(f"/api/v1/judgments/{x}/accept", headers=admin)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["state"] == "accepted"
        # Written into the suite file, comments kept, and the daemon reloaded it.
        text = (tmp_path / "core.yaml").read_text()
        assert "# The core suite." in text
        assert "# first" in text
        assert "relevant: {a: 1, x: 2}" in text
        assert daemon.loaded.suites["core"].by_id["c1"].relevant == {"a": 1, "x": 2}
        again = await api.post(f"/api/v1/judgments/{x}/reject", headers=admin)
        assert again.status_code == 409
        assert "is accepted, not proposed" in again.json()["detail"]
        assert (await api.post(f"/api/v1/judgments/{y}/reject", headers=admin)).status_code == 200
        assert (tmp_path / "core.yaml").read_text() == text  # a rejection writes nothing
        # A proposal for an id the case labels by now (by hand) cannot be accepted.
        (tmp_path / "core.yaml").write_text(text.replace("{a: 1, x: 2}", "{a: 1, x: 2, b: 1}"))
        clash = await api.post(f"/api/v1/judgments/{z}/accept", headers=admin)
        assert clash.status_code == 409
        assert "labels 'b' already" in clash.json()["detail"]
        assert (await api.get("/api/v1/judgments", params={"state": "all", "case": "c1"})).json()[
            "judgments"
        ][0]["doc_id"] == "b"


async def test_agreement_reads_decisions_and_labels_given_since(
    daemon: Daemon, tmp_path: Path
) -> None:
    x, y, _z, w = _propose(
        daemon.store, ("c1", "x", 2), ("c1", "y", 0), ("c1", "v", 3), ("c2", "w", 1)
    )
    found = JudgmentStore(daemon.store)
    loaded = daemon.loaded
    review.decide(loaded, found, x, True, NOW)  # judge relevant, people agree
    review.decide(loaded, found, y, False, NOW)  # judge not relevant, people disagree
    # v is still proposed but someone labelled it not relevant by hand: that counts too.
    path = tmp_path / "core.yaml"
    path.write_text(path.read_text().replace("{a: 1, x: 2}", "{a: 1, x: 2, v: 0}"))
    loaded = load_config(daemon.config_file, {})
    agreement = review.agreement(loaded, found)
    # (judge, people): x (T, T), y (F, T), v (T, F); w undecided and unlabelled: left out.
    assert agreement.table == (1, 1, 1, 0)
    assert agreement.kappa == pytest.approx(
        cohen_kappa([(True, True), (False, True), (True, False)]).kappa
    )
    assert review.agreement(loaded, found, judge="other").pairs == 0
    assert w


async def test_a_target_that_cannot_fetch_texts_leaves_the_ids_for_a_later_run(
    store: Store,
) -> None:
    seen: list[dict[str, Any]] = []
    grading, exporter = await _grading(store, _rerank({"x": 0.9}, seen), None)
    assert await grading.grade(_job("x")) == {"no_text": 1}
    assert _errors(exporter, "no_text") == 1
    assert JudgmentStore(store).find(None) == []
    assert seen == []
    await grading.stop()


async def test_a_judgment_number_no_column_holds_is_refused_not_a_server_error(
    daemon: Daemon,
) -> None:
    """Found by the OpenAPI fuzz test: an id past the column's range answered 500."""
    admin = {"Authorization": f"Bearer {ADMIN}"}
    transport = httpx.ASGITransport(create_app(daemon.service))
    huge = 4710639654716113428676608
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
        assert (await api.get(f"/api/v1/judgments/{huge}")).status_code == 422
        assert (await api.get("/api/v1/judgments/0")).status_code == 422
        refused = await api.post(f"/api/v1/judgments/{huge}/accept", headers=admin)
        assert refused.status_code == 422
