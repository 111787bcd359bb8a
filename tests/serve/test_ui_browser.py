"""The /ui/ pages in a real headless Chromium, over a real daemon watching the demo retriever.

One daemon and one browser for the module: the demo's BM25 retriever is watched every second,
its first run becomes the baseline, then it loses part of its index (``drop-docs``) and the
runs regress. The tests click from the fleet page to that run, its diff and a case, at 1,280
and 390 px, and write a screenshot of every page at both widths to a folder they print.

Needs Debian's ``chromium`` (driven through Playwright with the system browser; nothing here
downloads one). Skipped without it, unless RAGCANARY_REQUIRE_CHROMIUM=1 (CI) makes that a
failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import yaml
from browser_harness import (
    WIDTHS,
    chromium,
    chromium_or_skip,
    no_horizontal_scroll,
    screenshots_folder,
    shot,
    watched_page,
)
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for

ADMIN_TOKEN = "ui-admin-5f1c9e27d3"
INGEST_TOKEN = "ui-ingest-8b0e41"
SCRIPT_CASE = "script-injection"
SCRIPT_QUERY = "<script>window.__owned = 1; alert('owned')</script> parse json"
RUN_TIMEOUT_S = 60.0

# The contrast of every visible text against the background it is drawn on (WCAG 2 formula),
# the failures listed; text hidden for screen readers only is left out.
CONTRAST_CHECK = """() => {
  function rgba(text) {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  }
  function over(top, bottom) {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  }
  function background(el) {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const c = rgba(getComputedStyle(node).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let color = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) color = over(layers[i], color);
    return color;
  }
  function luminance(c) {
    const v = c.slice(0, 3).map(x => {
      x /= 255;
      return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  }
  const failures = [];
  for (const el of document.body.querySelectorAll("*")) {
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (style.visibility === "hidden" || style.display === "none") continue;
    if (box.width < 2 || box.height < 2) continue;
    if (el.closest(".sr-only") || el.closest("[hidden]") || el.closest("noscript")) continue;
    const bg = background(el);
    const fg = over(rgba(style.color), bg);
    const [l1, l2] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (l1 + 0.05) / (l2 + 0.05);
    const text = el.textContent.trim().slice(0, 40);
    const name = `${el.tagName.toLowerCase()}.${el.className}`;
    if (ratio < 4.5) failures.push(`${name}: ${ratio.toFixed(2)} "${text}"`);
  }
  return failures;
}"""


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the screenshots go to (RAGCANARY_UI_SCREENSHOTS, else a temporary one)."""
    return screenshots_folder(tmp_path_factory)


@dataclass(frozen=True)
class Demo:
    """The daemon on the demo retriever, its first run, and a later run in which every score
    was 0.15 lower, the order kept (a new score scale)."""

    daemon: DaemonProcess
    first: str
    shifted: str


def _newest(daemon: DaemonProcess) -> str:
    return str(daemon.get("/api/v1/runs", suite="demo", limit=1).json()["runs"][0]["run_id"])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The daemon on the demo retriever: a baseline, runs of shifted scores, then runs that lost
    part of the index and regressed."""
    chromium_or_skip()
    from ragcanary.demo.corpus import suite_path
    from ragcanary.demo.retriever import BackgroundServer

    home = tmp_path_factory.mktemp("ui-daemon")
    suite = yaml.safe_load(suite_path().read_text(encoding="utf-8"))
    suite["cases"].append(
        {"id": SCRIPT_CASE, "query": SCRIPT_QUERY, "relevant": ["json.loads"], "tags": ["json"]}
    )
    (home / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    with BackgroundServer(port=0) as retriever:
        port = free_port()
        config = {
            "storage": f"sqlite:///{home / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{port}",
            "targets": {
                "demo-bm25": {
                    "url": retriever.search_url,
                    "method": "POST",
                    "body": {"q": "{query}", "limit": "{k}"},
                    "results": "hits",
                    "id": "id",
                    "score": "score",
                    "concurrency": 8,
                }
            },
            "suites": {
                "demo": {
                    "cases": "suite.yaml",
                    "targets": ["demo-bm25"],
                    "every": "1s",
                    "k": [1, 3, 5, 10],
                    "depth": 10,
                    "thresholds": {"hit_rate": {5: 0.6}, "max_drop": 0.02},
                }
            },
        }
        path = home / "ragcanary.yaml"
        path.write_text(config_yaml(config), encoding="utf-8")
        env = {
            "RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN,
            "RAGCANARY_INGEST_TOKEN": INGEST_TOKEN,
            "RAGCANARY_LOG_FORMAT": "json",
        }
        with running(DaemonProcess(path, port, env)) as process:
            process.wait_runs("demo", "demo-bm25", 1, RUN_TIMEOUT_S, outcome="ok")
            first = _newest(process)
            httpx.post(f"{retriever.url}/mode", json={"mode": "shift-scores"}, timeout=5)
            # The first run to end may have begun before the switch; the second began after it.
            process.wait_runs("demo", "demo-bm25", 2, RUN_TIMEOUT_S)
            shifted = _newest(process)
            httpx.post(f"{retriever.url}/mode", json={"mode": "drop-docs"}, timeout=5)
            process.wait_runs("demo", "demo-bm25", 1, RUN_TIMEOUT_S, outcome="regression")
            # That run may have begun before the switch too: the next one began after it.
            process.wait_runs("demo", "demo-bm25", 1, RUN_TIMEOUT_S, outcome="regression")
            yield Demo(process, first, shifted)


@pytest.fixture(scope="module")
def daemon(demo: Demo) -> DaemonProcess:
    """The daemon; its newest runs lost part of the index and regressed."""
    return demo.daemon


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Chromium context with a fresh profile; each test opens its own page."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    # What the candidates pages ask for (HTTP Basic, the admin token as the password).
    with chromium(profile, http_credentials={"username": "oncall", "password": ADMIN_TOKEN}) as ctx:
        yield ctx


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab that fails the test on a script error, a console error or a dialog."""
    with watched_page(browser) as tab:
        yield tab


@pytest.mark.parametrize("width", WIDTHS)
def test_from_the_fleet_to_the_regressed_run_its_diff_and_a_case(
    daemon: DaemonProcess, page: Any, shots: Path, width: int
) -> None:
    """The regression is first on the fleet, its run lists regressed cases first, the diff marks
    the ids that left, and the case's chart has points; no page scrolls sideways."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(daemon.url + "/")
    assert page.url.endswith("/ui/")
    first = page.locator("table.fleet tbody tr").first
    assert first.get_attribute("data-status") == "regression"
    assert first.locator(".badge").inner_text() == "regression"
    no_horizontal_scroll(page)
    shot(page, shots, "fleet", width)

    first.locator("a.run-link").click()
    page.wait_for_url(re.compile(r"/ui/runs/"))
    assert "regression" in page.locator("h1").inner_text()
    rows = page.locator("table.cases tbody tr")
    assert rows.first.get_attribute("data-state") == "regressed"
    states = rows.evaluate_all("rows => rows.map(r => r.dataset.state)")
    regressed = states.count("regressed")
    assert regressed > 0
    assert states[:regressed] == ["regressed"] * regressed
    no_horizontal_scroll(page)
    shot(page, shots, "run", width)

    page.get_by_role("link", name="Diff against the baseline").click()
    page.wait_for_url(re.compile(r"/ui/diff\?"))
    article = page.locator("article.case-diff").first
    # The worst case first: one whose relevant id left the top-k, marked so in its old list.
    left = article.locator(".list li.left.rel").first
    assert left.locator(".mark.left").inner_text().lower() == "left"
    left_id = left.locator("code").inner_text()
    assert f"relevant ids that left: {left_id}" in article.locator("p.moved").inner_text()
    # Beside it, why the newer run lost it: the demo target can't be asked about its index.
    assert left.locator(".mark.why").get_attribute("data-why") == "unknown"
    assert f"{left_id} (was #{left.locator('.n').inner_text()}; left the top-10; why: unknown)" in (
        article.locator("p.moved").inner_text()
    )
    no_horizontal_scroll(page)
    shot(page, shots, "diff", width)

    article.locator("h3 a").click()
    page.wait_for_url(re.compile(r"/ui/case\?"))
    page.wait_for_function("() => (window.ragcanaryCharts || []).length > 0")
    points = page.evaluate("() => window.ragcanaryCharts[0].data[0].length")
    assert points >= 2
    assert page.locator("#chart canvas").count() >= 1
    no_horizontal_scroll(page)
    shot(page, shots, "case", width)

    page.goto(daemon.url + "/ui/baselines")
    no_horizontal_scroll(page)
    shot(page, shots, "baselines", width)


# Each sparkline of the fleet as the browser drew it: its label, the runs it plots (its line's
# points and its lone dots; the larger dot on the last run sits on a point already counted)
# and its width on the screen.
SPARKLINES = """() => Array.from(document.querySelectorAll("table.fleet svg.spark")).map(svg => [
  svg.getAttribute("aria-label"),
  Array.from(svg.querySelectorAll("polyline")).reduce((n, line) => n + line.points.numberOfItems, 0)
    + svg.querySelectorAll('circle[r="1.5"]').length,
  svg.getBoundingClientRect().width,
])"""


def test_the_fleet_sparklines_draw_each_run_of_the_day(daemon: DaemonProcess, page: Any) -> None:
    """The daemon runs every second: its first minutes were one 30-minute slot, one dot."""
    daemon.wait_runs("demo", "demo-bm25", 5, RUN_TIMEOUT_S)
    page.goto(daemon.url + "/ui/")
    drawn = page.evaluate(SPARKLINES)
    assert len(drawn) == 2, drawn  # Hit@5 and MRR of the one pair
    for label, points, width in drawn:
        runs = int(re.search(r"(\d+) runs", label).group(1))  # type: ignore[union-attr]
        assert width == 120
        if runs <= width:
            assert points == runs, (label, points)
        else:  # one point a slot of time, the shortest slots that fit the width
            assert width / 3 <= points <= width, (label, points)


@pytest.fixture(scope="module")
def reported(daemon: DaemonProcess) -> DaemonProcess:
    """Failure reports posted by the application and stored: the most reported is json."""
    reports = [
        *[{"query": "parse json into a dict", "signal": "thumbs_down", "ids": ["json.dumps"]}] * 3,
        {"query": SCRIPT_QUERY, "signal": "rephrased", "source": "web", "note": "<b>note</b>"},
        {"query": "read a csv file from ana@example.com", "signal": "abandoned"},
    ]
    auth = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    for body in reports:
        response = daemon.post(
            "/api/v1/candidates", json={**body, "target": "demo-bm25"}, headers=auth
        )
        assert response.status_code == 202, response.text
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    wait_for(
        lambda: len(httpx.get(daemon.url + "/api/v1/candidates", headers=admin, timeout=10)
                    .json()["candidates"]) == 3,
        RUN_TIMEOUT_S,
        "the three candidates stored",
    )  # fmt: skip
    return daemon


@pytest.mark.parametrize("width", WIDTHS)
def test_the_candidates_page_lists_the_most_reported_with_live_results(
    reported: DaemonProcess, page: Any, shots: Path, width: int
) -> None:
    """From the nav to the candidates: most reported first, its live hits from the demo
    retriever, the <script> query as text; the stale labels page too; no sideways scroll."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(reported.url + "/ui/")
    page.get_by_role("link", name="Candidates").click()
    page.wait_for_url(re.compile(r"/ui/candidates$"))
    cards = page.locator("article.candidate")
    assert cards.count() == 3
    first = cards.first
    assert first.locator(".query").inner_text() == "parse json into a dict"
    assert "3 reports" in first.locator("h3").inner_text()
    assert first.locator(".live").get_attribute("data-live") == "ok"
    assert first.locator(".live li").count() > 0
    queries = page.locator("article.candidate .query").all_inner_texts()
    assert SCRIPT_QUERY in queries
    assert "read a csv file from <email>" in queries  # redacted before it was stored
    assert page.evaluate("() => window.__owned") is None
    no_horizontal_scroll(page)
    shot(page, shots, "candidates", width)

    first.locator("h3 a").click()
    page.wait_for_url(re.compile(r"/ui/candidates/\d+$"))
    assert page.locator(".live li").count() > 0
    no_horizontal_scroll(page)
    shot(page, shots, "candidate", width)

    page.get_by_role("link", name="Stale labels").click()
    page.wait_for_url(re.compile(r"/ui/stale-labels$"))
    assert "demo · demo-bm25" in page.locator("h2").all_inner_texts()[0]
    no_horizontal_scroll(page)
    shot(page, shots, "stale-labels", width)


# Per case on the diff page: its id, each score move as shown (id, before, after, delta, the
# raw values in the titles, flagged or not), and the ids its two lists flag as drifted.
SCORE_MOVES = """() => Array.from(document.querySelectorAll("article.case-diff")).map(a => [
  a.querySelector("h3 a").textContent.trim(),
  Array.from(a.querySelectorAll(".score-move")).map(m => ({
    id: m.querySelector("code").textContent,
    from: Number(m.querySelector(".from").title), to: Number(m.querySelector(".to").title),
    delta: Number(m.querySelector(".delta").title),
    shown: [m.querySelector(".from").textContent, m.querySelector(".to").textContent,
            m.querySelector(".delta").firstChild.textContent],
    drifted: m.classList.contains("drifted") && m.querySelector(".delta.drift") !== null,
  })),
  Array.from(a.querySelectorAll(".list li")).filter(li => li.querySelector(".delta.drift"))
    .map(li => li.querySelector("code").textContent),
])"""


def test_the_diff_shows_each_score_move_as_the_api_gives_it(
    demo: Demo, page: Any, shots: Path
) -> None:
    """From the first run to one of the shifted scores: each case's moves, in the API's order,
    with the API's exact values in the titles and to 4 places on the page, flagged exactly when
    the API says the move was over score_drift."""
    pair = {"suite": "demo", "target": "demo-bm25", "from": demo.first, "to": demo.shifted}
    page.goto(f"{demo.daemon.url}/ui/diff?{urlencode(pair)}")
    found = page.evaluate(SCORE_MOVES)
    shown = {case: moves for case, moves, _ in found}
    flagged = {case: ids for case, _, ids in found}
    diff = demo.daemon.get("/api/v1/diff", **pair).json()
    api = {c["id"]: c["score_moves"] for c in diff["cases"] if c["id"] in shown}
    assert len(api) == len(shown) > 0
    assert all(api.values()), "a case listed without a score move"
    for case, moves in api.items():
        assert [m["id"] for m in shown[case]] == [m["id"] for m in moves], case
        for seen, want in zip(shown[case], moves, strict=True):
            exact = (want["from"], want["to"], want["delta"])
            assert (seen["from"], seen["to"], seen["delta"]) == exact
            delta = f"{want['delta']:+.4f}".replace("-", "\u2212")
            assert seen["shown"] == [f"{want['from']:.4f}", f"{want['to']:.4f}", delta]
            assert seen["drifted"] == want["drifted"] == (abs(want["delta"]) > 0.03 + 1e-12)
        # Both lists flag each drifted id beside it.
        assert set(flagged[case]) == {m["id"] for m in moves if m["drifted"]}, case
    assert any(m["drifted"] for moves in api.values() for m in moves)
    # Opened, every move table is readable and fits the width.
    page.evaluate(
        "() => document.querySelectorAll('details.score-moves').forEach(d => d.open = true)"
    )
    assert page.evaluate(CONTRAST_CHECK) == []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_horizontal_scroll(page)
        shot(page, shots, "diff-scores", width)


def test_a_relevant_id_that_left_is_shown_leaving_on_the_case_page(
    daemon: DaemonProcess, page: Any
) -> None:
    """The case page names the relevant id that left the top-k, and when."""
    diff = daemon.get("/api/v1/diff", suite="demo", target="demo-bm25").json()
    case = next(c for c in diff["cases"] if any(e["relevant"] for e in c["left"]))
    gone = next(e["id"] for e in case["left"] if e["relevant"])
    page.goto(f"{daemon.url}/ui/case?suite=demo&case={case['id']}&target=demo-bm25")
    events = page.locator("table", has_text="left").first.inner_text()
    assert gone in events
    assert gone in page.locator(".notice.bad").inner_text()  # not in the newest top-k


def test_a_query_with_a_script_tag_is_shown_as_text(daemon: DaemonProcess, page: Any) -> None:
    """A query holding <script> is text on the run and case pages and never runs."""
    page.goto(f"{daemon.url}/ui/case?suite=demo&case={SCRIPT_CASE}&target=demo-bm25")
    assert page.locator(".query.whole").inner_text() == SCRIPT_QUERY
    run = daemon.get("/api/v1/runs", suite="demo", limit=1).json()["runs"][0]["run_id"]
    page.goto(f"{daemon.url}/ui/runs/{run}?tag=json")
    assert SCRIPT_QUERY in page.locator("table.cases").inner_text()
    assert page.evaluate("() => window.__owned") is None


def test_the_keyboard_alone_reaches_the_regressed_run(daemon: DaemonProcess, page: Any) -> None:
    """Tab moves through visible focus rings to the first pair's run; Enter opens it."""
    page.goto(daemon.url + "/ui/")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    for _ in range(15):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => [document.activeElement.className, getComputedStyle(document.activeElement)"
            ".outlineStyle]"
        )
        assert focused[1] != "none", f"no visible focus on {focused[0]!r}"
        if focused[0] == "run-link":
            break
    else:
        raise AssertionError("Tab never reached the first pair's run link")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/ui/runs/"))


def test_text_contrast_is_at_least_4_5_to_1_on_every_page(daemon: DaemonProcess, page: Any) -> None:
    """Every visible text on every page is at least 4.5:1 against its background."""
    run = daemon.get("/api/v1/runs", suite="demo", limit=1).json()["runs"][0]["run_id"]
    paths = [
        "/ui/",
        f"/ui/runs/{run}",
        "/ui/diff?suite=demo&target=demo-bm25",
        "/ui/case?suite=demo&case=json-dumps&target=demo-bm25",
        "/ui/baselines",
        "/ui/candidates",
        "/ui/stale-labels",
    ]
    for path in paths:
        page.goto(daemon.url + path)
        assert page.evaluate(CONTRAST_CHECK) == [], path


def test_the_pin_form_needs_the_admin_token_and_never_shows_it(
    daemon: DaemonProcess, page: Any
) -> None:
    """A wrong token pins nothing; the right one pins the chosen run; neither is echoed."""
    ok = daemon.get("/api/v1/runs", suite="demo", outcome="ok", limit=1).json()["runs"]
    chosen = ok[0]["run_id"]
    page.goto(daemon.url + "/ui/baselines")
    page.select_option("select[name=run_id]", chosen)
    page.fill("input[name=token]", "not-the-token")
    page.get_by_role("button", name="Pin as baseline").click()
    assert "Wrong admin token" in page.locator(".notice").inner_text()
    assert "not-the-token" not in page.content()

    page.select_option("select[name=run_id]", chosen)
    page.fill("input[name=token]", ADMIN_TOKEN)
    page.get_by_role("button", name="Pin as baseline").click()
    page.wait_for_url(re.compile(r"pinned="))
    assert f"Pinned run {chosen}" in page.locator(".notice").inner_text()
    assert ADMIN_TOKEN not in page.content()
    assert page.locator("input[name=token]").input_value() == ""
    pinned = daemon.get("/api/v1/baselines").json()["baselines"]
    assert [b["run_id"] for b in pinned] == [chosen]
    assert ADMIN_TOKEN not in json.dumps(daemon.events())


def test_the_ui_sends_only_its_own_assets(daemon: DaemonProcess) -> None:
    """Every script and stylesheet of the pages is served by the daemon itself."""
    html = daemon.get("/ui/case", suite="demo", case="json-dumps", target="demo-bm25").text
    sources = re.findall(r'(?:src|href)="([^"]+\.(?:js|css)[^"]*)"', html)
    assert sources
    assert all(s.startswith("/ui/static/") for s in sources)
    for source in sources:
        assert daemon.get(source).status_code == 200
