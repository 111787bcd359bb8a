"""The HTTP API of `ragcanary serve`, in process, over a real daemon, SQLite and retriever."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from retrievers import FakeRetriever, target_entry

from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import RunReport
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-vendor-4b8e1f09"
ADMIN_TOKEN = "adm-token-93c7d2aa51"

SUITES = {
    "core.yaml": {
        "cases": [
            {"id": "password", "query": "reset password", "relevant": ["doc-7", "doc-2"]},
            {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"]},
            {"id": "label-free", "query": "pricing plans"},
        ]
    },
    "other.yaml": {"cases": [{"id": "ingest", "query": "reset password", "relevant": ["doc-2"]}]},
}

CONFIG = """\
storage: sqlite:///{db}
targets: {targets}
suites:
  core:
    cases: core.yaml
    targets: [vendor, mirror]
    k: [1, 3]
    depth: 5
  other:
    cases: other.yaml
    targets: [vendor]
    k: [1, 3]
    depth: 5
"""


def _targets(url: str) -> str:
    entry = target_entry(url, retries=0)
    return json.dumps({"vendor": entry, "mirror": entry})


VENDOR, MIRROR, OTHER = (
    JobKey("core", "vendor"),
    JobKey("core", "mirror"),
    JobKey("other", "vendor"),
)
REPORT_KEYS = {
    "suite",
    "target",
    "run_id",
    "started_at",
    "duration_s",
    "outcome",
    "coverage",
    "metrics",
    "baseline",
    "regressions",
    "cases",
}
CASE_KEYS = {"id", "query", "ids", "scores", "latency_s", "error", "metrics"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(api_key=API_KEY) as fake:
        yield fake


def _config(tmp_path: Path, url: str) -> Path:
    for name, suite in SUITES.items():
        (tmp_path / name).write_text(json.dumps(suite), encoding="utf-8")
    (tmp_path / "db").mkdir()
    path = tmp_path / "ragcanary.yaml"
    path.write_text(
        CONFIG.format(db=tmp_path / "db" / "ragcanary.db", targets=_targets(url)), encoding="utf-8"
    )
    return path


def _daemon(config: Path, admin_token: str | None) -> Daemon:
    environ = {"VENDOR_KEY": API_KEY}
    if admin_token is not None:
        environ["RAGCANARY_ADMIN_TOKEN"] = admin_token
    loaded = load_config(config, environ)
    daemon = Daemon(config, environ, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    return daemon


async def _client(daemon: Daemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(create_app(daemon.service)), base_url="http://localhost"
    )


@pytest.fixture
async def daemon(tmp_path: Path, retriever: FakeRetriever) -> AsyncIterator[Daemon]:
    """A daemon with an admin token, never started: runs happen only through ``run_now``."""
    daemon = _daemon(_config(tmp_path, retriever.url), ADMIN_TOKEN)
    yield daemon
    await daemon.shutdown()


@pytest.fixture
async def api(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    async with await _client(daemon) as client:
        yield client


# --- health and metrics ---------------------------------------------------------------------


async def test_healthz_answers_ok(api: httpx.AsyncClient) -> None:
    response = await api.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_readyz_is_200_while_storage_is_reachable(api: httpx.AsyncClient) -> None:
    response = await api.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "ready": True,
        "config": True,
        "storage": True,
        "reason": None,
        "buffered_runs": 0,
    }


async def test_readyz_is_503_with_a_reason_when_the_database_directory_is_gone(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    daemon = _daemon(_config(tmp_path, retriever.url), ADMIN_TOKEN)
    daemon.store.close()  # drop pooled connections, which would keep the deleted file open
    shutil.rmtree(tmp_path / "db")
    try:
        async with await _client(daemon) as api:
            response = await api.get("/readyz")
            runs = await api.get("/api/v1/runs")
    finally:
        await daemon.shutdown()
    body = response.json()
    assert response.status_code == 503
    assert (body["ready"], body["storage"]) == (False, False)
    assert "cannot reach the database" in body["reason"]
    assert runs.status_code == 503
    assert "storage unreachable" in runs.json()["detail"]


async def test_metrics_are_prometheus_text_with_the_last_run(
    daemon: Daemon, api: httpx.AsyncClient
) -> None:
    await daemon.run_now(VENDOR)
    response = await api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert 'ragcanary_hit_rate{k="3",suite="core",target="vendor"} 1.0' in text
    assert 'ragcanary_runs_total{outcome="ok",suite="core",target="vendor"} 1.0' in text
    # Counters of pairs that never ran exist at 0 from the moment the suite loads.
    assert 'ragcanary_runs_total{outcome="ok",suite="core",target="mirror"} 0.0' in text
    assert "ragcanary_build_info{" in text


# --- runs -----------------------------------------------------------------------------------


async def test_runs_are_listed_newest_first(daemon: Daemon, api: httpx.AsyncClient) -> None:
    ids = [(await daemon.run_now(key)).run_id for key in (VENDOR, MIRROR, OTHER, VENDOR)]
    response = await api.get("/api/v1/runs")
    assert response.status_code == 200
    assert [r["run_id"] for r in response.json()["runs"]] == ids[::-1]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"suite": "core"}, [3, 1, 0]),
        ({"target": "vendor"}, [3, 2, 0]),
        ({"suite": "core", "target": "vendor"}, [3, 0]),
        ({"suite": "other", "target": "mirror"}, []),
        ({"limit": 2}, [3, 2]),
        ({"suite": "core", "limit": 1}, [3]),
    ],
)
async def test_runs_filter_by_suite_and_target_and_limit(
    daemon: Daemon, api: httpx.AsyncClient, query: dict[str, Any], expected: list[int]
) -> None:
    ids = [(await daemon.run_now(key)).run_id for key in (VENDOR, MIRROR, OTHER, VENDOR)]
    response = await api.get("/api/v1/runs", params=query)
    assert response.status_code == 200
    assert [r["run_id"] for r in response.json()["runs"]] == [ids[i] for i in expected]


@pytest.mark.parametrize("limit", ["0", "1001", "many"])
async def test_runs_refuse_a_limit_out_of_range(api: httpx.AsyncClient, limit: str) -> None:
    response = await api.get("/api/v1/runs", params={"limit": limit})
    assert response.status_code == 422


async def test_run_summary_carries_outcome_coverage_and_metrics(
    daemon: Daemon, api: httpx.AsyncClient
) -> None:
    report = await daemon.run_now(VENDOR)
    (summary,) = (await api.get("/api/v1/runs")).json()["runs"]
    assert summary["outcome"] == report.outcome == "ok"
    assert summary["coverage"] == 1.0
    assert summary["metrics"] == report.metrics
    assert (summary["suite"], summary["target"]) == ("core", "vendor")


async def test_one_run_is_its_report_json_with_the_contract_keys(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    report = await daemon.run_now(VENDOR)
    response = await api.get(f"/api/v1/runs/{report.run_id}")
    assert response.status_code == 200
    body = response.json()
    assert body == marshal(report)
    assert set(body) >= REPORT_KEYS
    assert {"run_id", "deltas", "rank_overlap", "score_drift"} <= set(body["baseline"])
    assert all(set(case) >= CASE_KEYS for case in body["cases"])
    password = next(c for c in body["cases"] if c["id"] == "password")
    assert password["ids"] == ["doc-2", "doc-9"]
    assert password["metrics"]["rr"] == 1.0


async def test_unknown_run_is_404(api: httpx.AsyncClient) -> None:
    response = await api.get("/api/v1/runs/no-such-run")
    assert response.status_code == 404
    assert "no-such-run" in response.json()["detail"]


async def test_a_run_is_found_by_the_short_id_run_prints(
    daemon: Daemon, api: httpx.AsyncClient
) -> None:
    report = await daemon.run_now(VENDOR)
    response = await api.get(f"/api/v1/runs/{report.run_id[:12]}")
    assert response.status_code == 200, response.text
    assert response.json()["run_id"] == report.run_id


async def _twins(daemon: Daemon) -> tuple[str, str]:
    """Two stored runs of core on vendor whose ids share their first 8 characters."""
    report = await daemon.run_now(VENDOR)
    twin = report.run_id[:8] + "0" * 24
    daemon.store.save_run(replace(report, run_id=twin))
    return report.run_id, twin


@pytest.mark.parametrize("where", ["run", "diff-from", "diff-to", "baseline"])
async def test_an_ambiguous_short_id_is_400_listing_the_runs_it_could_be(
    daemon: Daemon, api: httpx.AsyncClient, where: str
) -> None:
    first, twin = await _twins(daemon)
    prefix = first[:8]
    pair = {"suite": "core", "target": "vendor"}
    if where == "run":
        response = await api.get(f"/api/v1/runs/{prefix}")
    elif where == "baseline":
        body = {"run_id": prefix}
        response = await api.post("/api/v1/baselines/core/vendor", json=body, headers=_admin())
    else:
        side = where.removeprefix("diff-")
        response = await api.get("/api/v1/diff", params={**pair, side: prefix})
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert f"run {prefix}: ambiguous, 2 stored runs start with it" in detail
    assert first in detail
    assert twin in detail
    assert daemon.store.get_baseline("core", "vendor") == first  # nothing pinned


async def test_diff_and_baseline_take_short_ids(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    before = await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    after = await daemon.run_now(VENDOR)
    short = {"from": before.run_id[:12], "to": after.run_id[:9]}
    diff = await api.get("/api/v1/diff", params={"suite": "core", "target": "vendor", **short})
    assert diff.status_code == 200, diff.text
    body = diff.json()
    assert (body["from"]["run_id"], body["to"]["run_id"]) == (before.run_id, after.run_id)
    pin = {"run_id": after.run_id[:12]}
    response = await api.post("/api/v1/baselines/core/vendor", json=pin, headers=_admin())
    assert response.status_code == 200, response.text
    assert response.json()["run_id"] == after.run_id
    assert daemon.store.get_baseline("core", "vendor") == after.run_id


# --- diff -----------------------------------------------------------------------------------


async def test_diff_defaults_to_baseline_against_latest(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    first = await daemon.run_now(VENDOR)  # pinned automatically: nothing was pinned yet
    await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    latest = await daemon.run_now(VENDOR)
    response = await api.get("/api/v1/diff", params={"suite": "core", "target": "vendor"})
    assert response.status_code == 200
    diff = response.json()
    assert diff["from"]["run_id"] == first.run_id
    assert diff["to"]["run_id"] == latest.run_id
    (case,) = [c for c in diff["cases"] if c["id"] == "password"]
    # With why the later run lost it: this target can't be asked whether its index holds it.
    left = {"id": "doc-7", "rank": 1, "score": 0.93, "why": "unknown", "relevant": True}
    assert case["left"] == [left]
    assert diff["to"]["baseline_run_id"] == first.run_id  # what that `why` is measured against
    assert case["metrics"]["recall@3"] == {"from": 1.0, "to": 0.5, "delta": -0.5}
    assert "rr" not in case["metrics"]  # doc-2 moved up to rank 1


async def test_diff_between_explicit_runs(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    before = await daemon.run_now(VENDOR)
    retriever.score_shift = -0.1
    after = await daemon.run_now(VENDOR)
    await daemon.run_now(VENDOR)
    query = {"suite": "core", "target": "vendor", "from": after.run_id, "to": before.run_id}
    diff = (await api.get("/api/v1/diff", params=query)).json()
    assert (diff["from"]["run_id"], diff["to"]["run_id"]) == (after.run_id, before.run_id)
    password = next(c for c in diff["cases"] if c["id"] == "password")
    assert password["score_deltas"]["doc-7"] == pytest.approx(0.1)
    assert password["left"] == password["entered"] == []
    # Each score as served in both runs, flagged: 0.1 is over the default score_drift 0.03.
    assert diff["thresholds"] == {"score_drift": 0.03, "embedding_changed_below": 0.999}
    moves = {m["id"]: m for m in password["score_moves"]}
    assert set(moves) == {"doc-7", "doc-2", "doc-9"}
    assert (moves["doc-7"]["from"], moves["doc-7"]["to"]) == (0.93 - 0.1, 0.93)
    assert moves["doc-7"]["delta"] == 0.93 - (0.93 - 0.1)
    assert all(m["drifted"] for m in moves.values())
    assert diff["to"]["baseline_run_id"] is None  # the first run had nothing to compare with


@pytest.mark.parametrize(
    ("runs", "query"),
    [
        ([], {}),
        ([VENDOR], {}),  # the only run is the pinned baseline itself
        ([VENDOR, VENDOR], {"from": "no-such-run"}),
        ([VENDOR], {"suite": "other"}),
    ],
)
async def test_diff_is_404_when_there_is_nothing_to_diff(
    daemon: Daemon, api: httpx.AsyncClient, runs: list[JobKey], query: dict[str, str]
) -> None:
    for key in runs:
        await daemon.run_now(key)
    response = await api.get("/api/v1/diff", params={"suite": "core", "target": "vendor", **query})
    assert response.status_code == 404
    assert response.json()["detail"]


# --- history --------------------------------------------------------------------------------


def _aged(report: RunReport, days: float, run_id: str) -> RunReport:
    started = datetime.now(UTC) - timedelta(days=days)
    return replace(report, run_id=run_id, started_at=started)


async def test_history_shows_ranks_of_relevant_ids_oldest_first(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    await daemon.run_now(VENDOR)
    await daemon.run_now(MIRROR)
    response = await api.get("/api/v1/history", params={"suite": "core", "case": "password"})
    assert response.status_code == 200
    rows = response.json()["history"]
    assert [r["relevant_ranks"] for r in rows] == [
        {"doc-7": 1, "doc-2": 2},
        {"doc-7": None, "doc-2": 1},
        {"doc-7": None, "doc-2": 1},
    ]
    assert [(r["target"], r["top_id"], r["top_score"]) for r in rows] == [
        ("vendor", "doc-7", 0.93),
        ("vendor", "doc-2", 0.81),
        ("mirror", "doc-2", 0.81),
    ]
    only_vendor = await api.get(
        "/api/v1/history", params={"suite": "core", "case": "password", "target": "vendor"}
    )
    assert len(only_vendor.json()["history"]) == 2


@pytest.mark.parametrize(("since", "expected"), [("1h", ["now"]), ("7d", ["3d", "now"])])
async def test_history_since_leaves_out_older_runs(
    daemon: Daemon, api: httpx.AsyncClient, since: str, expected: list[str]
) -> None:
    report = await daemon.run_now(VENDOR)
    daemon.store.save_run(_aged(report, 30, "30d"))
    daemon.store.save_run(_aged(report, 3, "3d"))
    names = {report.run_id: "now", "3d": "3d", "30d": "30d"}
    query = {"suite": "core", "case": "pricing", "since": since}
    rows = (await api.get("/api/v1/history", params=query)).json()["history"]
    assert [names[r["run_id"]] for r in rows] == expected


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"suite": "core", "case": "nope"}, 404),
        ({"suite": "nope", "case": "password"}, 404),
        ({"suite": "core", "case": "password", "since": "a while"}, 422),
        ({"suite": "core"}, 422),
    ],
)
async def test_history_refuses_unknown_cases_and_bad_since(
    api: httpx.AsyncClient, query: dict[str, str], status: int
) -> None:
    response = await api.get("/api/v1/history", params=query)
    assert response.status_code == status


@pytest.mark.parametrize("since", ["999999d", "0s", "500ms", "9" * 400, "9" * 400 + "w"])
async def test_history_since_out_of_range_is_400_with_the_allowed_range(
    api: httpx.AsyncClient, since: str
) -> None:
    """A since timedelta cannot hold answered 500; now 400 says which range is allowed."""
    query = {"suite": "core", "case": "password", "since": since}
    response = await api.get("/api/v1/history", params=query)
    assert response.status_code == 400, response.text
    assert "since must be between 1s and 3650d" in response.json()["detail"]


# --- baselines ------------------------------------------------------------------------------


async def test_baseline_post_is_refused_when_no_admin_token_is_set(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    daemon = _daemon(_config(tmp_path, retriever.url), admin_token=None)
    try:
        report = await daemon.run_now(VENDOR)
        async with await _client(daemon) as api:
            response = await api.post(
                "/api/v1/baselines/core/vendor",
                json={"run_id": report.run_id},
                headers={"Authorization": "Bearer "},
            )
    finally:
        await daemon.shutdown()
    assert response.status_code == 403
    assert "RAGCANARY_ADMIN_TOKEN" in response.json()["detail"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {ADMIN_TOKEN}x"}],
)
async def test_baseline_post_needs_the_right_token(
    daemon: Daemon, api: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    first = await daemon.run_now(VENDOR)
    second = await daemon.run_now(VENDOR)
    response = await api.post(
        "/api/v1/baselines/core/vendor", json={"run_id": second.run_id}, headers=headers
    )
    assert response.status_code == 401
    assert daemon.store.get_baseline("core", "vendor") == first.run_id


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_baseline_post_pins_the_latest_successful_run_by_default(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await daemon.run_now(VENDOR)
    latest_ok = await daemon.run_now(VENDOR)
    retriever.status = 503  # an outage afterwards must not become the baseline
    assert (await daemon.run_now(VENDOR)).outcome == "unavailable"
    response = await api.post("/api/v1/baselines/core/vendor", json={}, headers=_admin())
    assert response.status_code == 200
    assert response.json() == {"suite": "core", "target": "vendor", "run_id": latest_ok.run_id}
    assert daemon.store.get_baseline("core", "vendor") == latest_ok.run_id
    listed = (await api.get("/api/v1/baselines")).json()["baselines"]
    assert [(b["suite"], b["target"], b["run_id"]) for b in listed] == [
        ("core", "vendor", latest_ok.run_id)
    ]


async def test_baseline_post_without_a_body_pins_the_latest_successful_run(
    daemon: Daemon, api: httpx.AsyncClient
) -> None:
    await daemon.run_now(VENDOR)
    latest = await daemon.run_now(VENDOR)
    response = await api.post("/api/v1/baselines/core/vendor", headers=_admin())
    assert response.status_code == 200, response.text
    assert daemon.store.get_baseline("core", "vendor") == latest.run_id


async def test_baseline_post_pins_an_explicit_run_and_the_next_run_compares_with_it(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    degraded = await daemon.run_now(VENDOR)
    response = await api.post(
        "/api/v1/baselines/core/vendor", json={"run_id": degraded.run_id}, headers=_admin()
    )
    assert response.status_code == 200
    following = await daemon.run_now(VENDOR)
    assert following.baseline is not None
    assert following.baseline.run_id == degraded.run_id
    assert following.baseline.rank_overlap == pytest.approx(1.0)


@pytest.mark.parametrize("which", ["unknown", "other-suite", "other-target"])
async def test_baseline_post_is_404_for_a_run_it_cannot_pin(
    daemon: Daemon, api: httpx.AsyncClient, which: str
) -> None:
    pinned = await daemon.run_now(VENDOR)
    runs = {
        "other-suite": await daemon.run_now(OTHER),
        "other-target": await daemon.run_now(MIRROR),
    }
    run_id = runs[which].run_id if which in runs else "no-such-run"
    response = await api.post(
        "/api/v1/baselines/core/vendor", json={"run_id": run_id}, headers=_admin()
    )
    assert response.status_code == 404
    assert run_id in response.json()["detail"]
    assert daemon.store.get_baseline("core", "vendor") == pinned.run_id


async def test_baseline_post_is_404_without_a_successful_run(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    retriever.status = 503
    await daemon.run_now(VENDOR)
    response = await api.post("/api/v1/baselines/core/vendor", json={}, headers=_admin())
    assert response.status_code == 404


# --- schema and secrets ---------------------------------------------------------------------


async def test_openapi_lists_the_contract_paths(api: httpx.AsyncClient) -> None:
    paths = (await api.get("/openapi.json")).json()["paths"]
    assert {
        "/healthz",
        "/readyz",
        "/-/reload",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/diff",
        "/api/v1/history",
        "/api/v1/baselines/{suite}/{target}",
    } <= set(paths)
    assert "post" in paths["/api/v1/baselines/{suite}/{target}"]
    diff_params = {p["name"] for p in paths["/api/v1/diff"]["get"]["parameters"]}
    assert diff_params == {"suite", "target", "from", "to"}


async def test_the_api_docs_page_works_offline_and_lists_every_operation(
    api: httpx.AsyncClient,
) -> None:
    """/docs loads nothing from another origin (Swagger UI came from a CDN: blank offline),
    links /openapi.json and names every operation of it; /redoc (a CDN page too) is gone."""
    page = await api.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    loaded = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert loaded
    foreign = [url for url in loaded if not url.startswith(("/", "#", "data:"))]
    assert not foreign, foreign
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert 'href="/openapi.json"' in page.text
    paths = (await api.get("/openapi.json")).json()["paths"]
    for path, operations in paths.items():
        for method in operations:
            assert f"<code>{html.escape(path)}</code>" in page.text, path
            assert f'<span class="method">{method.upper()}</span>' in page.text, (method, path)
    assert (await api.get("/redoc")).status_code == 404


async def test_no_response_carries_a_secret(
    daemon: Daemon, api: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    first = await daemon.run_now(VENDOR)
    retriever.api_key = "rotated"  # the target now refuses the configured key
    await daemon.run_now(VENDOR)
    await daemon.run_now(MIRROR)
    responses = [
        await api.get(path)
        for path in (
            "/healthz",
            "/readyz",
            "/metrics",
            "/openapi.json",
            "/api/v1/jobs",
            "/api/v1/runs",
            f"/api/v1/runs/{first.run_id}",
            "/api/v1/diff?suite=core&target=vendor",
            "/api/v1/history?suite=core&case=password",
            "/api/v1/baselines",
        )
    ]
    for headers in ({}, {"Authorization": "Bearer nope"}, _admin()):
        responses.append(await api.post("/api/v1/baselines/core/vendor", json={}, headers=headers))
    assert [r.status_code for r in responses[-3:]] == [401, 401, 200]
    assert any("HTTP 401" in r.text for r in responses)  # the failed queries are shown...
    for response in responses:
        for secret in (API_KEY, ADMIN_TOKEN):
            assert secret not in response.text, response.request.url
            assert secret not in str(response.headers)
