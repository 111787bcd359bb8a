"""The /ui/ pages rendered in process over a real daemon, SQLite and retriever: what each page
says, escaping, sizes, errors, and the one write route."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from alert_contract import CONTRACT, SLO_ALERTS
from factories import run_report
from retrievers import FakeRetriever, target_entry

from ragcanary.config.model import SuiteConfig
from ragcanary.serve.daemon import Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.serve.http.ui import casepage, fleet, render, runbookpage
from ragcanary.suites.loaded import load_config

pytestmark = pytest.mark.anyio

API_KEY = "sk-vendor-77a1"
ADMIN_TOKEN = "adm-ui-0c4e9b"
SCRIPT_QUERY = "<script>alert('query')</script> reset password"
EVIL_ID = '<img src=x onerror="alert(1)">'
CORPUS = {
    "reset password": [("doc-7", 0.93), ("doc-2", 0.81), ("doc-9", 0.44)],
    SCRIPT_QUERY: [("doc-7", 0.91), (EVIL_ID, 0.5)],
    "pricing plans": [("doc-3", 0.88), ("doc-7", 0.52)],
}
SUITE = {
    "cases": [
        {"id": "password", "query": "reset password", "relevant": ["doc-7", "doc-2"],
         "tags": ["account"]},
        {"id": "script", "query": SCRIPT_QUERY, "relevant": ["doc-7"], "tags": ["xss"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"], "tags": ["billing"]},
    ]
}  # fmt: skip
CONFIG = """\
storage: sqlite:///{db}
targets: {targets}
suites:
  core:
    cases: core.yaml
    targets: [vendor, mirror]
    k: [1, 3]
    depth: 5
"""
VENDOR, MIRROR = JobKey("core", "vendor"), JobKey("core", "mirror")
PAGE_BYTES = 300_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=CORPUS, api_key=API_KEY) as fake:
        yield fake


def _daemon(tmp_path: Path, url: str, admin_token: str | None) -> Daemon:
    (tmp_path / "core.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    entry = target_entry(url, retries=0)
    path = tmp_path / "ragcanary.yaml"
    targets = json.dumps({"vendor": entry, "mirror": entry})
    path.write_text(CONFIG.format(db=tmp_path / "ui.db", targets=targets), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    if admin_token is not None:
        environ["RAGCANARY_ADMIN_TOKEN"] = admin_token
    loaded = load_config(path, environ)
    daemon = Daemon(path, environ, loaded)
    daemon.exporter.load(suite_pairs(loaded))
    daemon.store.migrate()
    return daemon


@pytest.fixture
async def daemon(tmp_path: Path, retriever: FakeRetriever) -> AsyncIterator[Daemon]:
    """A daemon with an admin token, never started: runs happen through ``run_now``."""
    daemon = _daemon(tmp_path, retriever.url, ADMIN_TOKEN)
    yield daemon
    await daemon.shutdown()


@pytest.fixture
async def ui(daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(daemon.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


async def _regressed(daemon: Daemon, retriever: FakeRetriever) -> tuple[str, str]:
    """A baseline run, then a run after doc-7 was lost; their run ids."""
    first = await daemon.run_now(VENDOR)
    retriever.drop_ids = {"doc-7"}
    second = await daemon.run_now(VENDOR)
    assert second.outcome == "regression"
    return first.run_id, second.run_id


def _page(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("text/html")
    assert len(response.content) <= PAGE_BYTES
    assert "script-src 'self'" in response.headers["content-security-policy"]
    return response.text


async def test_the_root_redirects_to_the_fleet(ui: httpx.AsyncClient) -> None:
    response = await ui.get("/")
    assert (response.status_code, response.headers["location"]) == (307, "/ui/")


async def test_the_fleet_lists_the_regression_first_and_pairs_never_run(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    _, regressed = await _regressed(daemon, retriever)
    text = _page(await ui.get("/ui/"))
    statuses = re.findall(r'<tr class="\w+" data-status="(\w+)">', text)
    assert statuses == ["regression", "never"]
    assert f'href="/ui/runs/{regressed}"' in text
    assert "not run yet" in text


def _spark_points(text: str) -> list[tuple[str, int]]:
    """Each sparkline of a page: its label, and how many runs it draws (its line's points and
    its lone dots; the larger dot marking the last run is drawn on a point already counted)."""
    found = []
    for label, body in re.findall(
        r'<svg class="spark"[^>]*aria-label="([^"]*)"[^>]*>(.*?)</svg>', text
    ):
        lines = re.findall(r'<polyline points="([^"]*)"/>', body)
        dots = re.findall(r'<circle [^>]*r="1.5"/>', body)
        found.append((label, sum(len(points.split()) for points in lines) + len(dots)))
    return found


async def test_a_sparkline_draws_each_of_the_27_runs_of_half_an_hour(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    """One point per 30-minute slot drew a demo's first 27 runs as one dot."""
    report = await daemon.run_now(VENDOR)
    for minute in range(1, 27):
        earlier = report.started_at - timedelta(minutes=minute)
        daemon.store.save_run(replace(report, run_id=f"early-{minute:02d}", started_at=earlier))
    sparklines = _spark_points(_page(await ui.get("/ui/")))
    vendor = [(label, points) for label, points in sparklines if "27 runs" in label]
    assert [points for _, points in vendor] == [27, 27], sparklines  # Hit@k and MRR


async def test_the_fleet_filters_to_one_pair(daemon: Daemon, ui: httpx.AsyncClient) -> None:
    await daemon.run_now(MIRROR)
    text = _page(await ui.get("/ui/", params={"suite": "core", "target": "mirror"}))
    assert re.findall(r'data-status="(\w+)"', text) == ["ok"]


async def test_latest_redirects_to_the_newest_run_or_says_there_is_none(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    first = await daemon.run_now(VENDOR)
    second = await daemon.run_now(VENDOR)
    pair = {"suite": "core", "target": "vendor"}
    found = await ui.get("/ui/latest", params=pair)
    assert found.headers["location"] == f"/ui/runs/{second.run_id}"
    # A Grafana data link names a moment in milliseconds: the run started then or just before.
    just_before = int((second.started_at - timedelta(microseconds=1)).timestamp() * 1000)
    then = await ui.get("/ui/latest", params={**pair, "at": str(just_before)})
    assert then.headers["location"] == f"/ui/runs/{first.run_id}"
    missing = await ui.get("/ui/latest", params={"suite": "core", "target": "mirror"})
    assert missing.status_code == 404
    assert "No run of suite core on target mirror" in _page(missing)
    too_early = await ui.get("/ui/latest", params={**pair, "at": "1000"})
    assert too_early.status_code == 404


async def test_the_run_page_lists_regressed_cases_first_with_the_verdict(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    baseline, regressed = await _regressed(daemon, retriever)
    text = _page(await ui.get(f"/ui/runs/{regressed}"))
    # pricing kept its relevant id; only its second hit, doc-7, left the list.
    assert re.findall(r'data-state="(\w+)"', text) == ["regressed", "regressed", "changed"]
    assert f'href="/ui/runs/{baseline}"' in text  # the baseline it was compared with
    assert "p-value" in text
    assert "95% CI" in text
    assert "dropped" in text  # a verdict reason


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tag": "billing"}, ["pricing"]),
        # script lost its only relevant id (Hit 1 -> 0), password one of two: worst first.
        ({"outcome": "regressed"}, ["script", "password"]),
        ({"outcome": "ok"}, ["script", "password", "pricing"]),
        ({"sort": "id", "dir": "desc"}, ["script", "pricing", "password"]),
    ],
)
async def test_the_run_page_filters_and_sorts_on_the_server(
    daemon: Daemon,
    ui: httpx.AsyncClient,
    retriever: FakeRetriever,
    query: dict[str, str],
    expected: list[str],
) -> None:
    _, regressed = await _regressed(daemon, retriever)
    text = _page(await ui.get(f"/ui/runs/{regressed}", params=query))
    shown = re.findall(r'<a href="/ui/case\?suite=core&amp;case=(\w+)&amp;target=vendor">', text)
    assert shown == expected


async def test_unknown_runs_cases_and_pairs_are_404_pages(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    await daemon.run_now(VENDOR)
    for path, params in (
        ("/ui/runs/no-such-run", {}),
        ("/ui/diff", {"suite": "nope", "target": "vendor"}),
        ("/ui/diff", {"suite": "core", "target": "nope"}),
        ("/ui/diff", {"suite": "core", "target": "mirror"}),  # never ran
        ("/ui/case", {"suite": "core", "case": "nope"}),
        ("/ui/case", {"suite": "nope", "case": "password"}),
        ("/ui/case", {"suite": "core", "case": "password", "target": "nope"}),
    ):
        response = await ui.get(path, params=params)
        assert response.status_code == 404, (path, params)
        assert "Back to the fleet" in _page(response)


async def test_a_run_page_takes_the_short_id_run_prints_and_refuses_an_ambiguous_one(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    report = await daemon.run_now(VENDOR)
    run_id = report.run_id
    shown = await ui.get(f"/ui/runs/{run_id[:12]}")
    assert shown.status_code == 200
    assert run_id in _page(shown)
    twin = run_id[:8] + "0" * 24
    daemon.store.save_run(replace(report, run_id=twin))
    for path, params in ((f"/ui/runs/{run_id[:8]}", {}), ("/ui/diff", {"from": run_id[:8]})):
        response = await ui.get(path, params={"suite": "core", "target": "vendor", **params})
        assert response.status_code == 400, path
        text = _page(response)
        assert f"run {run_id[:8]}: ambiguous, 2 stored runs start with it" in text
        assert run_id in text
        assert twin in text


async def test_a_diff_of_runs_of_another_pair_is_400(daemon: Daemon, ui: httpx.AsyncClient) -> None:
    mine = await daemon.run_now(VENDOR)
    theirs = await daemon.run_now(MIRROR)
    query = {"suite": "core", "target": "vendor", "from": theirs.run_id, "to": mine.run_id}
    response = await ui.get("/ui/diff", params=query)
    assert response.status_code == 400
    assert "mirror" in _page(response)


async def test_the_diff_marks_the_relevant_id_that_left_beside_the_other_list(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await _regressed(daemon, retriever)
    text = _page(await ui.get("/ui/diff", params={"suite": "core", "target": "vendor"}))
    article = text[text.index('<article class="case-diff"') :]
    article = article[: article.index("</article>")]
    assert "password" in article or "script" in article
    left = re.search(r'<li class="left rel">.*?</li>', article, re.S)
    assert left is not None
    assert "doc-7" in left.group(0)
    assert ">left<" in left.group(0)
    # Beside it, why the newer run lost it (its diagnosis): this target can't be asked.
    why = (
        '<span class="mark why" data-why="unknown" title="why the later run lost it: unknown">'
        "unknown</span>"
    )
    assert why in left.group(0)
    assert f"relevant ids that left: <code>doc-7</code> (was #1; left the top-5; why: {why})" in (
        article
    )


async def test_the_diff_shows_each_score_that_moved_exactly_and_flags_drift(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    """Scores up by 0.05, the order kept: each case lists its ids' scores before → after to 4
    places, the raw values in titles, flagged over score_drift (0.03 by default), in the
    newer run's order when the moves are equal."""
    await daemon.run_now(VENDOR)
    retriever.score_shift = 0.05
    await daemon.run_now(VENDOR)
    text = _page(await ui.get("/ui/diff", params={"suite": "core", "target": "vendor"}))
    articles = {
        re.search(r'<h3><a href="[^"]*">([^<]+)</a>', a).group(1): a  # type: ignore[union-attr]
        for a in text.split('<article class="case-diff"')[1:]
    }
    assert sorted(articles) == ["password", "pricing", "script"]
    password = articles["password"]
    summary = "Scores moved: 3 ids in both lists, <strong>3 more than score_drift 0.03</strong>"
    assert summary in password
    move = (
        '<tr class="score-move drifted"><th scope="row"><code>doc-2</code></th>'
        '<td class="num from" title="0.81">0.8100</td>'
        f'<td class="num to" title="{0.81 + 0.05}">0.8600</td>'
        f'<td class="num"><span class="delta drift" title="{0.81 + 0.05 - 0.81}">+0.0500'
        '<span class="sr-only"> over score_drift</span></span></td></tr>'
    )
    assert move in password
    order = re.findall(r'<tr class="score-move[^"]*"><th scope="row"><code>([^<]+)<', password)
    assert order == ["doc-7", "doc-2", "doc-9"]
    # In the table and both lists each moved score is flagged, its raw value in the title.
    assert password.count('<span class="sr-only"> over score_drift</span>') == 3 + 6
    assert f'<span class="sc" title="{0.93 + 0.05}">0.980</span>' in password
    assert "score_drift (0.03)" in text  # the legend names the threshold
    assert "query vector cos" not in text  # the target searches by text: no vectors


async def test_user_and_target_text_is_escaped_on_every_page(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    """A query with <script> and an id with an event handler are shown as text everywhere."""
    _, regressed = await _regressed(daemon, retriever)
    pages = [
        await ui.get("/ui/"),
        await ui.get(f"/ui/runs/{regressed}"),
        await ui.get("/ui/diff", params={"suite": "core", "target": "vendor"}),
        await ui.get("/ui/case", params={"suite": "core", "case": "script", "target": "vendor"}),
        await ui.get("/ui/baselines"),
    ]
    for response in pages:
        text = _page(response)
        assert API_KEY not in text  # nor any secret: the target's key, the admin token
        assert ADMIN_TOKEN not in text
        assert "<script>alert" not in text
        assert "<img src=x" not in text
        # Only our own scripts: external files and the chart's JSON data.
        for tag in re.findall(r"<script[^>]*>", text):
            assert re.fullmatch(r'<script (src="/ui/static/[^"]+" defer|type="application/json" '
                                r'id="chart-data")>', tag), tag  # fmt: skip
    run, case = _page(pages[1]), _page(pages[3])
    assert "&lt;script&gt;alert(&#39;query&#39;)&lt;/script&gt; reset password" in run
    assert "&lt;script&gt;alert(&#39;query&#39;)&lt;/script&gt; reset password" in case
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in case  # in a last top-k list
    data = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', case)
    assert data is not None
    assert json.loads(data.group(1))["times"]


async def test_the_case_page_charts_every_run_and_tells_when_an_id_left(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    await _regressed(daemon, retriever)
    await daemon.run_now(VENDOR)
    text = _page(await ui.get("/ui/case", params={"suite": "core", "case": "password"}))
    chart = json.loads(re.search(r'id="chart-data">(.*?)</script>', text).group(1))  # type: ignore[union-attr]
    assert chart["ranks"] == {"doc-7": [1, 6, 6], "doc-2": [2, 1, 1]}  # 6: out of the top 5
    assert chart["top_score"] == [0.93, 0.81, 0.81]
    assert "Not in the newest answered top-5: <code>doc-7</code>" in text
    assert '<span class="mark left">left</span> (was #1)' in text


async def test_the_baselines_page_without_a_token_says_how_to_set_one(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    daemon = _daemon(tmp_path, retriever.url, None)
    try:
        first = await daemon.run_now(VENDOR)
        transport = httpx.ASGITransport(create_app(daemon.service))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as ui:
            text = _page(await ui.get("/ui/baselines"))
            refused = await ui.post(
                "/ui/baselines",
                data={"pair": '["core", "vendor"]', "run_id": first.run_id, "token": "x"},
            )
    finally:
        await daemon.shutdown()
    assert "Set <code>RAGCANARY_ADMIN_TOKEN</code>" in text
    assert "<fieldset disabled>" in text
    assert f'href="/ui/runs/{first.run_id}"' in text  # pinned by itself, as the first run
    assert refused.status_code == 403


async def test_the_pin_form_pins_with_the_admin_token_only(
    daemon: Daemon, ui: httpx.AsyncClient, retriever: FakeRetriever
) -> None:
    first = await daemon.run_now(VENDOR)
    second = await daemon.run_now(VENDOR)
    form = {"pair": '["core", "vendor"]', "run_id": second.run_id}
    wrong = await ui.post("/ui/baselines", data={**form, "token": "guess"})
    assert wrong.status_code == 401
    assert "Wrong admin token" in _page(wrong)
    assert daemon.store.get_baseline("core", "vendor") == first.run_id
    right = await ui.post("/ui/baselines", data={**form, "token": ADMIN_TOKEN})
    assert right.status_code == 303
    assert daemon.store.get_baseline("core", "vendor") == second.run_id
    shown = _page(await ui.get(right.headers["location"]))
    assert f"Pinned run {second.run_id} as the baseline of core on vendor" in shown
    for response in (wrong, right):
        assert ADMIN_TOKEN not in response.text
        assert "guess" not in response.text
        assert ADMIN_TOKEN not in str(response.headers)
    other = {"pair": '["core", "mirror"]', "run_id": first.run_id, "token": ADMIN_TOKEN}
    foreign = await ui.post("/ui/baselines", data=other)
    assert foreign.status_code == 404
    assert daemon.store.get_baseline("core", "mirror") is None


async def test_a_pin_form_whose_pair_is_json_nested_too_deep_pins_nothing(
    daemon: Daemon, ui: httpx.AsyncClient
) -> None:
    """Issue 34 item 9: the decoder's RecursionError is an unknown pair, not a 500."""
    first = await daemon.run_now(VENDOR)
    nested = "[" * 2_500 + "]" * 2_500
    form = {"pair": nested, "run_id": first.run_id, "token": ADMIN_TOKEN}
    refused = await ui.post("/ui/baselines", data=form)
    assert refused.status_code == 404
    assert daemon.store.get_baseline("core", "vendor") == first.run_id  # pinned by itself


async def test_the_pages_add_no_write_route_but_the_pin_form(daemon: Daemon) -> None:
    app = create_app(daemon.service)
    writes = {
        (method, route.path)
        for route in app.routes
        for method in getattr(route, "methods", None) or ()
        if method not in ("GET", "HEAD")
    }
    assert {w for w in writes if not w[1].startswith(("/api/", "/-/"))} == {
        ("POST", "/ui/baselines")
    }


async def test_storage_down_is_a_503_page(
    daemon: Daemon, ui: httpx.AsyncClient, tmp_path: Path
) -> None:
    await daemon.run_now(VENDOR)
    daemon.store.close()
    (tmp_path / "ui.db").unlink()
    for name in ("ui.db-wal", "ui.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    (tmp_path / "ui.db").mkdir()  # a directory where the database was: unreadable
    response = await ui.get("/ui/")
    assert response.status_code == 503
    assert "Storage is unreachable" in response.text


async def test_the_static_assets_and_the_vendored_chart_are_served(
    ui: httpx.AsyncClient,
) -> None:
    for name in ("ui.css", "ui.js", "chart.js", "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"):
        path = f"/ui/static/{name}"
        assert (await ui.get(path)).status_code == 200, path
    assert (await ui.get("/ui/static/../pages.py")).status_code == 404


async def test_every_alert_s_runbook_is_a_page_of_the_daemon(ui: httpx.AsyncClient) -> None:
    """What an alert's runbook_url opens: the runbook, its links to the others as pages."""
    for alert in sorted(CONTRACT | SLO_ALERTS):
        response = await ui.get(f"/ui/runbooks/{alert}")
        assert response.status_code == 200, alert
        text = _page(response)
        assert f'<h1 id="{alert.lower()}">{alert}</h1>' in text, alert
        assert '<h2 id="check-first">Check first</h2>' in text, alert
    regression = _page(await ui.get("/ui/runbooks/RagCanaryRegression"))
    assert '<a href="/ui/runbooks/RagCanaryHitRateDrop">RagCanaryHitRateDrop</a>' in regression
    assert 'href="/ui/runbooks/#re-baselining-after-an-intended-change"' in regression
    assert "<pre><code>ragcanary diff --suite S --target T" in regression
    index = _page(await ui.get("/ui/runbooks/"))
    for alert in CONTRACT | SLO_ALERTS:
        assert f'<a href="/ui/runbooks/{alert}">{alert}</a>' in index
    for missing in ("RagCanaryNoSuchAlert", "README", "..%2Fpages.py", "RagCanaryStale.md"):
        assert (await ui.get(f"/ui/runbooks/{missing}")).status_code == 404, missing
    # Names asked for that have no runbook are not kept: a client cannot grow the cache.
    for i in range(50):
        assert (await ui.get(f"/ui/runbooks/RagCanaryMadeUp{i}")).status_code == 404
    assert runbookpage._rendered.cache_info().currsize <= len(CONTRACT | SLO_ALERTS) + 1


# Pure parts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, "hit_rate@5"),
        ({"k": [1, 3]}, "hit_rate@3"),
        ({"k": [1, 3, 10], "thresholds": {"hit_rate": {10: 0.5, 3: 0.9}}}, "hit_rate@3"),
    ],
)
def test_the_fleet_shows_the_hit_rate_with_a_floor_else_at_5(
    settings: dict[str, Any], expected: str
) -> None:
    suite = SuiteConfig(cases="x.yaml", targets=["t"], **settings)
    assert fleet.headline_hit_key(suite) == expected


def _point(minute: int, rank: int | None, outcome: str = "ok") -> dict[str, Any]:
    ids = [] if rank is None else ["other"] * (rank - 1) + ["rel"]
    return {
        "run_id": f"r{minute}",
        "started_at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minute),
        "target": "t",
        "run_outcome": "ok",
        "outcome": outcome,
        "error": None,
        "top_score": 0.9,
        "ids": ids if outcome == "ok" else None,
    }


def test_thinning_keeps_the_one_run_where_the_id_was_missing() -> None:
    rows = [_point(m, None if m == 4321 else 1) for m in range(8640)]
    data = casepage.chart_data(rows, casepage.columns(rows, ["rel"], depth=10), depth=10)
    assert len(data["times"]) == casepage.MAX_POINTS
    assert data["ranks"]["rel"].count(11) == 1  # 11: out of the top 10
    assert data["thinned"]
    assert data["runs"] == 8640


def test_events_skip_outages_and_list_leaving_and_coming_back_newest_first() -> None:
    rows = [_point(0, 1), _point(1, None, "timeout"), _point(2, None), _point(3, 2)]
    events = casepage.events(rows, casepage.columns(rows, ["rel"], depth=10))
    assert [(e.run_id, e.left, e.rank) for e in events] == [("r3", False, 2), ("r2", True, 1)]


def test_an_id_left_only_if_an_answered_run_shown_had_it_in_the_top_k() -> None:
    """Ranks past the depth (a run stored with a larger depth) and outages do not count."""
    rows = [_point(0, None), _point(1, 1, "timeout"), _point(2, None)]
    assert casepage.never_in(casepage.columns(rows, ["rel"], depth=10)) == {"rel"}
    deep = {**_point(3, None), "ids": [f"x{i}" for i in range(10)] + ["rel"]}  # rank 11
    table = casepage.columns([*rows, deep], ["rel"], depth=10)
    assert table.ranks["rel"][3] is None
    assert casepage.never_in(table) == {"rel"}
    table = casepage.columns([_point(0, 3), *rows], ["rel"], depth=10)
    assert casepage.never_in(table) == set()  # it was #3 once: it left
    assert casepage.absent_now(table) == ["rel"]


def _day(count: int, every_s: float, regression: int | None = None) -> list[Any]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        (f"r{i}", start + timedelta(seconds=every_s * i), "regression" if i == regression else "ok")
        for i in range(count)
    ]


def test_a_sparkline_draws_every_run_while_they_fit_its_width() -> None:
    """15 runs, or 120 (one a pixel): each is a point, however close together in time."""
    assert fleet.sample(_day(15, 300)) == list(range(15))
    assert fleet.sample(_day(120, 1)) == list(range(120))


@pytest.mark.parametrize(
    ("count", "every_s", "slot_s"),
    [
        (288, 300, 900),  # a day every 5 minutes: the worst of each quarter hour
        (130, 5, 10),  # the demo's first 11 minutes: not one dot
        (17_280, 5, 900),  # the demo's whole day
    ],
)
def test_more_runs_than_pixels_draw_the_worst_of_each_slot_that_fits(
    count: int, every_s: float, slot_s: int
) -> None:
    day = _day(count, every_s, regression=count // 2 + 1)
    chosen = fleet.sample(day)
    slots = [int(day[i][1].timestamp() // slot_s) for i in chosen]
    assert len(chosen) <= render.SPARK_WIDTH
    assert slots == sorted(set(slots))  # one run a slot, oldest first
    assert len(slots) == len({int(run[1].timestamp() // slot_s) for run in day})  # every slot
    assert count // 2 + 1 in chosen  # a one-run regression still shows
    # A later run changes only the last slot's choice: the others stay drawn.
    more = fleet.sample([*day, (f"r{count}", day[-1][1] + timedelta(seconds=every_s), "ok")])
    assert set(chosen[:-1]) <= set(more)


def test_the_fleet_shows_the_floor_and_each_metric_family_once() -> None:
    """Four hit_rate drops, a floor and a canary were the first two of six reasons; the fleet
    shows the floor and hit_rate's worst k, then how many more there are (the canary)."""
    drops = [
        {"kind": "drop", "metric": f"hit_rate@{k}", "case": None, "amount": k / 100,
         "message": f"hit_rate@{k} dropped"}
        for k in (1, 3, 5, 10)
    ]  # fmt: skip
    canary = {"kind": "min_score", "metric": None, "case": "c1", "message": "canary c1: low"}
    floor = {"kind": "floor", "metric": "hit_rate@5", "case": None, "amount": 0.1,
             "message": "hit_rate@5 is below the floor"}  # fmt: skip
    report = run_report(outcome="regression", failures=[*drops, canary, floor])
    summary = fleet.head_summary(report)
    assert summary["reasons"] == [
        "hit_rate@5 is below the floor",
        "hit_rate@10 dropped (also dropped at @1, @3, @5)",
    ]
    assert summary["more_reasons"] == 1


def test_the_memo_reads_each_value_once_and_forgets_the_oldest() -> None:
    reads: list[list[str]] = []

    def read(keys: list[str]) -> dict[str, int]:
        reads.append(keys)
        return {k: len(k) for k in keys if k != "gone"}

    memo: fleet.Memo[int] = fleet.Memo(limit=2)
    assert memo.get(["a", "bb", "gone"], read) == {"a": 1, "bb": 2}
    assert memo.get(["bb", "ccc"], read) == {"bb": 2, "ccc": 3}
    assert memo.get(["a"], read) == {"a": 1}  # forgotten when ccc came: read again
    assert reads == [["a", "bb", "gone"], ["ccc"], ["a"]]


@pytest.mark.parametrize(
    ("outcome", "age_min", "status"),
    [
        ("ok", 4, "ok"),
        ("ok", 20, "stale"),  # three 5-minute intervals and a minute have passed
        ("regression", 20, "regression"),
        ("unavailable", 1, "unavailable"),
    ],
)
def test_a_pair_row_says_what_state_the_pair_is_in(outcome: str, age_min: int, status: str) -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    head = {
        "run_id": "r1",
        "started_at": (now - timedelta(minutes=age_min)).isoformat(),
        "outcome": outcome,
        "coverage": 1.0,
        "metrics": {"hit_rate@5": 0.8, "mrr": 0.7},
        "deltas": {"hit_rate@5": -0.1},
    }
    suite = SuiteConfig(cases="x.yaml", targets=["t"])
    row = fleet.pair_row("s", "t", suite, 300.0, [head], [outcome], {}, None, now)
    assert row.status == status
    assert (row.hit, row.hit_delta) == ((None, None) if outcome == "unavailable" else (0.8, -0.1))


@pytest.mark.parametrize(
    ("value", "digits", "shown"),
    [
        (0.05000000000000004, 4, "+0.0500"),
        (-0.15, 4, "\u22120.1500"),
        (0.0004, 3, "+4.0e\u221204"),  # a move too small for 3 places is never shown as 0
        (-2e-6, 4, "\u22122.0e\u221206"),
        (0.0, 4, "0.0000"),
        (None, 4, "\u2014"),
    ],
)
def test_a_score_move_is_shown_signed_and_never_as_zero(
    value: float | None, digits: int, shown: str
) -> None:
    assert render.moved(value, digits) == shown
