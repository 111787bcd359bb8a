"""`ragcanary baseline`, `diff` and `history` over a store filled by real daemon runs."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from retrievers import FakeRetriever, target_entry
from terminal import in_a_terminal
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.serve.daemon import Daemon, JobKey
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import load_config

API_KEY = "sk-oncall-5d2e7a90"

SUITE = {
    "cases": [
        {"id": "password", "query": "reset password", "relevant": ["doc-7", "doc-2"]},
        {"id": "pricing", "query": "pricing plans", "relevant": ["doc-3"]},
    ]
}

CONFIG = """\
storage: sqlite:///{db}
targets: {targets}
suites:
  core:
    cases: suite.yaml
    targets: [vendor, mirror]
    k: [1, 3]
    depth: 5
"""


def _targets(url: str) -> str:
    entry = target_entry(url, retries=0)
    return json.dumps({"vendor": entry, "mirror": entry})


VENDOR, MIRROR = JobKey("core", "vendor"), JobKey("core", "mirror")


@dataclass(frozen=True)
class Stored:
    """A config whose store holds these runs of core on vendor, oldest first."""

    config: Path
    db: str
    first: str  # healthy; pinned automatically as the first healthy run
    second: str  # healthy, unchanged
    dropped: str  # doc-7 removed from the index: `password` lost its top document
    down: str  # the target answered 503: unavailable
    mirror: str  # a healthy run of core on the other target


async def _runs(config: Path, retriever: FakeRetriever) -> dict[str, str]:
    environ = {"VENDOR_KEY": API_KEY}
    daemon = Daemon(config, environ, load_config(config, environ))
    ids = {}
    try:
        ids["first"] = (await daemon.run_now(VENDOR)).run_id
        ids["second"] = (await daemon.run_now(VENDOR)).run_id
        retriever.drop_ids = {"doc-7"}
        ids["dropped"] = (await daemon.run_now(VENDOR)).run_id
        retriever.status = 503
        ids["down"] = (await daemon.run_now(VENDOR)).run_id
        retriever.status, retriever.drop_ids = 200, set()
        ids["mirror"] = (await daemon.run_now(MIRROR)).run_id
    finally:
        await daemon.shutdown()
    return ids


def _write_config(directory: Path, url: str) -> tuple[Path, str]:
    (directory / "suite.yaml").write_text(json.dumps(SUITE), encoding="utf-8")
    config = directory / "ragcanary.yaml"
    config.write_text(
        CONFIG.format(db=directory / "ragcanary.db", targets=_targets(url)), encoding="utf-8"
    )
    return config, f"sqlite:///{directory / 'ragcanary.db'}"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A database filled once per module by real runs (they take most of this file's time)."""
    directory = tmp_path_factory.mktemp("filled")
    with FakeRetriever(api_key=API_KEY) as retriever:
        config, _db = _write_config(directory, retriever.url)
        return directory, asyncio.run(_runs(config, retriever))


@pytest.fixture
def stored(tmp_path: Path, filled: tuple[Path, dict[str, str]]) -> Stored:
    """A copy of the filled database for one test, which may change it."""
    directory, ids = filled
    for db_file in directory.glob("ragcanary.db*"):
        shutil.copy(db_file, tmp_path / db_file.name)
    config, db = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    return Stored(config, db, **ids)


def _invoke(config: Path, *args: str) -> Any:
    result = CliRunner().invoke(
        app, [*args, "-c", str(config)], env={"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
    )
    assert API_KEY not in result.output
    return result


def _baseline(stored: Stored) -> str | None:
    with Store.from_url(stored.db) as store:
        return store.get_baseline("core", "vendor")


# --- baseline -------------------------------------------------------------------------------


def test_accept_pins_the_latest_successful_run_by_default(stored: Stored) -> None:
    assert _baseline(stored) == stored.first
    result = _invoke(stored.config, "baseline", "accept", "--suite", "core", "--target", "vendor")
    assert result.exit_code == 0, result.output
    # `down` is newer but unavailable: an outage must never become the baseline.
    assert result.output.strip() == f"baseline of core on vendor is now run {stored.dropped}"
    assert _baseline(stored) == stored.dropped


def test_accept_pins_the_run_given(stored: Stored) -> None:
    args = ("baseline", "accept", "--suite", "core", "--target", "vendor", "--run", stored.second)
    result = _invoke(stored.config, *args)
    assert result.exit_code == 0, result.output
    assert _baseline(stored) == stored.second


@pytest.mark.parametrize("run", ["no-such-run", "mirror"])
def test_accept_refuses_a_run_it_cannot_pin_with_exit_2(stored: Stored, run: str) -> None:
    run_id = getattr(stored, run, run)
    args = ("baseline", "accept", "--suite", "core", "--target", "vendor", "--run", run_id)
    result = _invoke(stored.config, *args)
    assert result.exit_code == 2
    assert f"--run {run_id}: no run of suite 'core' on target 'vendor'" in result.stderr
    assert _baseline(stored) == stored.first


def test_accept_without_a_successful_run_says_what_to_do(tmp_path: Path) -> None:
    config, _db = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    result = _invoke(config, "baseline", "accept", "--suite", "core", "--target", "vendor")
    assert result.exit_code == 2
    assert "no successful run of suite 'core' on target 'vendor'" in result.stderr
    assert "--run" in result.stderr


def test_show_lists_pinned_baselines_as_a_table(stored: Stored) -> None:
    result = _invoke(stored.config, "baseline", "show")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if stored.first in line]
    assert len(rows) == 1
    assert "core" in rows[0]
    assert "vendor" in rows[0]
    assert any(stored.mirror in line and "mirror" in line for line in result.output.splitlines())


def test_show_json_has_suite_target_run_and_time(stored: Stored) -> None:
    result = _invoke(stored.config, "baseline", "show", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["suite"], r["target"], r["run_id"]) for r in rows] == [
        ("core", "mirror", stored.mirror),
        ("core", "vendor", stored.first),
    ]
    assert all(datetime.fromisoformat(r["set_at"]).tzinfo is not None for r in rows)


def test_show_says_when_nothing_is_pinned(tmp_path: Path) -> None:
    config, _db = _write_config(tmp_path, "http://127.0.0.1:9/v2/query")
    result = _invoke(config, "baseline", "show")
    assert result.exit_code == 0, result.output
    assert "no baseline pinned yet" in result.output


# --- diff -----------------------------------------------------------------------------------


def test_diff_names_the_case_that_lost_its_document(stored: Stored) -> None:
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor")
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"from: {stored.first}" in out
    assert f"  to: {stored.dropped}" in out  # the latest answered run...
    # ...said plainly to predate the outage that followed it.
    assert f"OUTAGE: the newest run, {stored.down}" in " ".join(out.split())
    rows = [line for line in out.splitlines() if "doc-7 (#" in line]
    assert [row.split()[0] for row in rows] == ["password", "pricing"]  # worst first
    row = rows[0]
    assert "doc-7 (#1 0.930)" in row
    assert "recall@3" in row
    assert "changed cases (2, worst first; 0 unchanged; ★ relevant)" in out
    # Why the newer run lost it: the generic target can't be asked whether its index holds it.
    assert "★doc-7 (#1 0.930): unknown" in row
    assert "score and query-vector drift" not in out  # no score moved, no vectors


def test_diff_json_has_runs_metrics_and_cases(stored: Stored) -> None:
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", "--json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert set(diff) == {
        "suite",
        "target",
        "from",
        "to",
        "outage",
        "newest_outage",
        "thresholds",
        "metrics",
        "cases",
        "unchanged",
        "added",
        "removed",
        "fingerprint_changes",
    }
    assert (diff["from"]["run_id"], diff["to"]["run_id"]) == (stored.first, stored.dropped)
    assert diff["metrics"]["recall@3"] == {"from": 1.0, "to": 0.75, "delta": -0.25}
    assert [c["id"] for c in diff["cases"]] == ["password", "pricing"]
    case = diff["cases"][0]
    assert case["left"] == [
        {"id": "doc-7", "rank": 1, "score": 0.93, "why": "unknown", "relevant": True}
    ]
    assert case["entered"] == []
    assert case["score_moves"] == []
    assert "embedding_cosine" not in case  # the target searches by text
    assert diff["thresholds"] == {"score_drift": 0.03, "embedding_changed_below": 0.999}
    assert diff["to"]["baseline_run_id"] == stored.first  # what the `why` is measured against
    assert diff["newest_outage"]["run_id"] == stored.down
    assert diff["newest_outage"]["unanswered"] == {"http_5xx": 2}
    assert diff["to"]["outcome"] in ("ok", "regression")
    assert case["moves"] == [
        {"id": "doc-2", "from": 2, "to": 1},
        {"id": "doc-9", "from": 3, "to": 2},
    ]
    assert case["metrics"]["recall@3"]["delta"] == -0.5


def test_diff_shows_each_score_that_moved_beside_the_ids(tmp_path: Path) -> None:
    """Every score up by 0.05: per case, each id's score in both runs and the move, flagged
    over the suite's score_drift (0.03 by default); the JSON holds the scores as served."""
    environ = {"VENDOR_KEY": API_KEY}
    with FakeRetriever(api_key=API_KEY) as retriever:
        config, _db = _write_config(tmp_path, retriever.url)

        async def runs() -> None:
            daemon = Daemon(config, environ, load_config(config, environ))
            try:
                await daemon.run_now(VENDOR)
                retriever.score_shift = 0.05
                await daemon.run_now(VENDOR)
            finally:
                await daemon.shutdown()

        asyncio.run(runs())
    result = _invoke(config, "diff", "--suite", "core", "--target", "vendor")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "score and query-vector drift (! over score_drift 0.03;" in out
    for move in ("doc-7 0.9300→0.9800 +0.0500!", "doc-2 0.8100→0.8600 +0.0500!"):
        assert move in out
    result = _invoke(config, "diff", "--suite", "core", "--target", "vendor", "--json")
    cases = {c["id"]: c for c in json.loads(result.stdout)["cases"]}
    moves = {m["id"]: m for m in cases["password"]["score_moves"]}
    assert set(moves) == {"doc-7", "doc-2", "doc-9"}
    assert (moves["doc-7"]["from"], moves["doc-7"]["to"]) == (0.93, 0.93 + 0.05)
    assert moves["doc-7"]["delta"] == (0.93 + 0.05) - 0.93
    assert all(m["drifted"] for m in moves.values())


def test_diff_from_to_compares_the_runs_given(stored: Stored) -> None:
    args = ("--from", stored.dropped, "--to", stored.second, "--json")
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", *args)
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert (diff["from"]["run_id"], diff["to"]["run_id"]) == (stored.dropped, stored.second)
    entered = {c["id"]: c["entered"] for c in diff["cases"]}
    assert entered == {
        "password": [{"id": "doc-7", "rank": 1, "score": 0.93, "relevant": True}],
        "pricing": [{"id": "doc-7", "rank": 2, "score": 0.52, "relevant": False}],
    }


def test_diff_refuses_a_run_of_another_target_with_exit_2(stored: Stored) -> None:
    args = ("--from", stored.mirror)
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", *args)
    assert result.exit_code == 2
    assert f"run {stored.mirror} is of suite 'core' on target 'mirror'" in result.stderr


def test_diff_to_an_outage_says_so_and_lists_no_case(stored: Stored) -> None:
    args = ("--to", stored.down)
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", *args)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "OUTAGE: the newer run was unavailable (coverage 0% (http_5xx=2))" in out
    assert "UNAVAILABLE" in out
    assert "changed cases" not in out


def test_read_commands_need_none_of_the_retrievers_secrets(stored: Stored) -> None:
    """VENDOR_KEY unset: diff, history, runs and baseline show still read storage."""
    for args in (
        ("diff", "--suite", "core", "--target", "vendor"),
        ("history", "--suite", "core", "--case", "password", "--target", "vendor"),
        ("runs", "--suite", "core"),
        ("baseline", "show"),
    ):
        result = CliRunner().invoke(app, [*args, "-c", str(stored.config)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (args, result.output)
        assert "not set" not in result.output


def test_diff_of_identical_runs_lists_no_case(stored: Stored) -> None:
    args = ("--from", stored.first, "--to", stored.second, "--json")
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", *args)
    diff = json.loads(result.stdout)
    assert (diff["cases"], diff["metrics"], diff["unchanged"]) == ([], {}, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope", "--target", "vendor"], "--suite nope: no such suite"),
        (["--suite", "core", "--target", "nope"], "--target nope: no such target"),
        (["--suite", "core", "--target", "vendor", "--from", "x1"], "run x1: no such run"),
        (["--suite", "core", "--target", "vendor", "--to", "x2"], "run x2: no such run"),
    ],
)
def test_diff_refuses_unknown_names_with_exit_2(
    stored: Stored, args: list[str], message: str
) -> None:
    result = _invoke(stored.config, "diff", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_diff_with_only_the_baseline_stored_says_there_is_nothing_to_diff(
    stored: Stored,
) -> None:
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "mirror")
    assert result.exit_code == 2
    assert "nothing to diff" in result.stderr


# --- history --------------------------------------------------------------------------------


def test_history_json_has_rank_of_each_relevant_id_top_score_and_outcome(stored: Stored) -> None:
    args = ("--suite", "core", "--case", "password", "--target", "vendor", "--json")
    result = _invoke(stored.config, "history", *args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["run_id"] for r in rows] == [stored.first, stored.second, stored.dropped, stored.down]
    assert [r["relevant_ranks"] for r in rows] == [
        {"doc-7": 1, "doc-2": 2},
        {"doc-7": 1, "doc-2": 2},
        {"doc-7": None, "doc-2": 1},
        {"doc-7": None, "doc-2": None},
    ]
    assert [(r["top_id"], r["top_score"], r["outcome"]) for r in rows] == [
        ("doc-7", 0.93, "ok"),
        ("doc-7", 0.93, "ok"),
        ("doc-2", 0.81, "ok"),
        (None, None, "http_5xx"),
    ]


def test_history_table_shows_one_row_per_run_with_ranks(stored: Stored) -> None:
    result = _invoke(stored.config, "history", "--suite", "core", "--case", "password")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "core / password: 5 runs" in out
    rows = [line for line in out.splitlines() if "vendor" in line or "mirror" in line]
    assert len(rows) == 5
    assert "#1" in rows[0]
    assert "#2" in rows[0]
    assert "http_5xx" in rows[3]
    assert "mirror" in rows[4]
    assert stored.dropped in rows[2]  # the run id, to pass to `diff --from/--to`


def _cells(line: str, bar: str) -> list[str]:
    return [cell.strip() for cell in line.split(bar)[1:-1]]


def test_history_shows_the_canarys_verdict_beside_the_query_outcome(stored: Stored) -> None:
    """The run that lost doc-7 answered (query outcome ok) and regressed the canary."""
    args = ("--suite", "core", "--case", "password", "--target", "vendor")
    result = _invoke(stored.config, "history", *args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()  # not a terminal: plain lines, cells two spaces apart
    (header,) = [re.split(r"\s{2,}", line.strip()) for line in lines if "query outcome" in line]
    runs = {stored.first, stored.second, stored.dropped, stored.down}
    body = [re.split(r"\s{2,}", line.strip()) for line in lines]
    body = [row for row in body if len(row) > 1 and row[1] in runs]
    assert [row[1] for row in body] == [stored.first, stored.second, stored.dropped, stored.down]
    assert "regressed" in body[2], body[2]
    assert header[3:5] == ["verdict", "query outcome"]
    assert [row[3:5] for row in body] == [
        ["ok", "ok"],
        ["ok", "ok"],
        ["regressed", "ok"],
        ["unanswered", "http_5xx"],
    ]
    rows_json = json.loads(_invoke(stored.config, "history", *args, "--json").stdout)
    assert [(r["verdict"], r["outcome"]) for r in rows_json] == [
        ("ok", "ok"),
        ("ok", "ok"),
        ("regressed", "ok"),
        ("unanswered", "http_5xx"),
    ]


@pytest.mark.parametrize("since", ["999999d", "0s", "9" * 400])
def test_history_since_out_of_range_exits_2_with_the_allowed_range(
    stored: Stored, since: str
) -> None:
    """``--since 999999d`` crashed with an OverflowError; it is a usage error naming the range."""
    args = ("--suite", "core", "--case", "password", "--since", since)
    result = _invoke(stored.config, "history", *args)
    assert result.exit_code == 2, result.output
    assert "since must be between 1s and 3650d" in result.stderr


@pytest.mark.parametrize(("since", "runs"), [("1h", 5), ("30d", 6), ("90d", 7)])
def test_history_since_bounds_how_far_back(stored: Stored, since: str, runs: int) -> None:
    with Store.from_url(stored.db) as store:
        report = store.get_report(stored.first)
        assert report is not None
        for run_id, days in (("aged-10d", 10), ("aged-60d", 60)):
            started = datetime.now(UTC) - timedelta(days=days)
            store.save_run(replace(report, run_id=run_id, started_at=started))
    args = ("--suite", "core", "--case", "pricing", "--since", since, "--json")
    result = _invoke(stored.config, "history", *args)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == runs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "password", "--since", "a week"], "--since:"),
        (["--case", "password", "--since", "yesterday"], "--since:"),
        (["--case", "nope"], "--case nope: no such case in suite 'core'"),
        (["--case", "password", "--target", "nope"], "--target nope: no such target"),
    ],
)
def test_history_refuses_bad_arguments_with_exit_2(
    stored: Stored, args: list[str], message: str
) -> None:
    result = _invoke(stored.config, "history", "--suite", "core", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_history_of_an_unknown_suite_exits_2(stored: Stored) -> None:
    result = _invoke(stored.config, "history", "--suite", "nope", "--case", "password")
    assert result.exit_code == 2
    assert "--suite nope: no such suite" in result.stderr


# --- in a pipe and on a terminal -------------------------------------------------------------

BOX = set("│┃┏┓┗┛┡┩└┘━─")
READ_COMMANDS = [
    ("diff", "--suite", "core", "--target", "vendor"),
    ("history", "--suite", "core", "--case", "password"),
    ("runs", "--suite", "core"),
    ("baseline", "show"),
]


def _run_lines(out: str, stored: Stored) -> list[str]:
    """The lines naming one of the stored runs of core on vendor."""
    ids = (stored.first, stored.second, stored.dropped, stored.down)
    return [line for line in out.splitlines() if any(i in line for i in ids)]


@pytest.mark.parametrize("args", READ_COMMANDS)
def test_piped_at_80_columns_every_run_id_is_whole_on_a_plain_line(
    stored: Stored, args: tuple[str, ...]
) -> None:
    """A pipe (`| grep`, a log) gets rows as plain lines, never an id folded over lines."""
    result = CliRunner().invoke(app, [*args, "-c", str(stored.config)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert not BOX & set(out), out
    assert _run_lines(out, stored), out  # each id the command shows is on a line, whole


def test_piped_history_is_one_line_a_run_with_every_column(stored: Stored) -> None:
    """`history | grep ID` finds the whole row: its time, id, target, outcome and ranks."""
    args = ["history", "--suite", "core", "--case", "password", "-c", str(stored.config)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if stored.dropped in line]
    assert row.split()[3:] == ["vendor", "regressed", "ok", "doc-2", "0.8100", "#1", "-"], row
    with Store.from_url(stored.db) as store:
        report = store.get_report(stored.dropped)
    assert report is not None
    assert row.startswith(str(report.started_at).split()[0]), row


def test_a_narrow_terminal_gets_plain_lines_and_a_wide_one_the_table(stored: Stored) -> None:
    args = ["history", "--suite", "core", "--case", "password", "-c", str(stored.config)]
    code, narrow = in_a_terminal(args, stored.config.parent, {}, columns=80)
    assert code == 0, narrow
    assert not BOX & set(narrow), narrow
    rows = _run_lines(narrow, stored)
    assert len(rows) == 4, narrow
    assert all((("vendor" in row and "#" in row) or "http_5xx" in row) for row in rows), narrow
    code, wide = in_a_terminal(args, stored.config.parent, {}, columns=200)
    assert code == 0, wide
    assert BOX & set(wide), wide  # the drawn table, since it fits
    assert len(_run_lines(wide, stored)) == 4, wide


# --- run ids as `run` prints them ----------------------------------------------------------


def test_diff_takes_the_short_ids_run_prints(stored: Stored) -> None:
    """`run --baseline` prints the first 12 characters of an id: diff takes them."""
    args = ("--from", stored.first[:12], "--to", stored.dropped[:8], "--json")
    result = _invoke(stored.config, "diff", "--suite", "core", "--target", "vendor", *args)
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert (diff["from"]["run_id"], diff["to"]["run_id"]) == (stored.first, stored.dropped)


def test_export_and_baseline_accept_take_a_short_id(stored: Stored, tmp_path: Path) -> None:
    result = _invoke(stored.config, "export", stored.dropped[:12], "--out", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "t" / f"{stored.dropped}.run").is_file()
    args = ("--suite", "core", "--target", "vendor", "--run", stored.second[:10])
    result = _invoke(stored.config, "baseline", "accept", *args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"baseline of core on vendor is now run {stored.second}"
    assert _baseline(stored) == stored.second


@pytest.mark.parametrize(
    "args",
    [
        ("diff", "--suite", "core", "--target", "vendor", "--from", "{prefix}"),
        ("diff", "--suite", "core", "--target", "vendor", "--to", "{prefix}"),
        ("export", "{prefix}", "--out", "{out}"),
        ("baseline", "accept", "--suite", "core", "--target", "vendor", "--run", "{prefix}"),
    ],
)
def test_an_ambiguous_short_id_is_exit_2_listing_the_runs_it_could_be(
    stored: Stored, tmp_path: Path, args: tuple[str, ...]
) -> None:
    twin = stored.first[:8] + "0" * 24
    with Store.from_url(stored.db) as store:
        report = store.get_report(stored.first)
        assert report is not None
        store.save_run(replace(report, run_id=twin))
    prefix = stored.first[:8]
    filled = [a.format(prefix=prefix, out=tmp_path / "out") for a in args]
    result = _invoke(stored.config, *filled)
    assert result.exit_code == 2, result.output
    assert f"run {prefix}: ambiguous, 2 stored runs start with it" in result.stderr
    assert stored.first in result.stderr
    assert twin in result.stderr
    assert _baseline(stored) == stored.first  # nothing pinned
    assert not (tmp_path / "out").exists()  # nothing exported
