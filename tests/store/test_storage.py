"""Storage of runs, results and baselines, on a real SQLite file and the local PostgreSQL."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from factories import answer, case, case_entry, report_data, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from version6 import write_version6

from ragcanary.config.model import SuiteConfig
from ragcanary.measure.evaluation import evaluate
from ragcanary.measure.fingerprint import Fingerprint
from ragcanary.measure.report_json import marshal, unmarshal, unmarshal_case
from ragcanary.measure.results import OUTCOMES
from ragcanary.measure.run_report import (
    ABSENT,
    CaseComparison,
    CaseEntry,
    RunReport,
    build_report,
)
from ragcanary.store import migrations
from ragcanary.store.engine import make_engine
from ragcanary.store.errors import StorageError, StorageUnavailable
from ragcanary.store.overview import run_heads
from ragcanary.store.pruning import delete_runs, delete_values, find_unreferenced
from ragcanary.store.rows_v6 import case_row, decode_ids, encode_ids
from ragcanary.store.schema import rankings, run_parts, runs
from ragcanary.store.schema_v6 import results_v6
from ragcanary.store.shared import shared_values
from ragcanary.store.storage import Store
from ragcanary.suites.judge import settings_for

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
LATEST = migrations.latest_version(migrations.UPGRADES)
SUMMARY_KEYS = {
    "run_id",
    "suite",
    "target",
    "started_at",
    "duration_s",
    "outcome",
    "coverage",
    "metrics",
    "deltas",
}


def make_data(
    run_id: str,
    started_at: datetime | str = NOW,
    *,
    suite: str = "core",
    target: str = "search",
    outcome: str = "ok",
    case_ids: tuple[str, ...] = ("alpha", "beta"),
    **more: Any,
) -> dict[str, Any]:
    """The JSON of ``make_report``'s report (``more``: a baseline, a claim, ...)."""
    return report_data(
        run_id,
        suite=suite,
        target=target,
        started_at=started_at,
        duration_s=1.25,
        outcome=outcome,
        metrics={"hit_rate@5": 1.0, "mrr": 0.75},
        counts={"cases": len(case_ids), "answered": len(case_ids)},
        cases=[
            case_entry(
                case_id,
                ids=[f"{case_id}-doc", f"{run_id}-doc"],
                scores=[0.9, 0.5],
                metrics={"hit_rate@5": 1.0, "rr": 1.0},
            )
            for case_id in case_ids
        ],
        **more,
    )


def make_report(
    run_id: str,
    started_at: datetime | str = NOW,
    *,
    suite: str = "core",
    target: str = "search",
    outcome: str = "ok",
    case_ids: tuple[str, ...] = ("alpha", "beta"),
    **more: Any,
) -> RunReport:
    """A report shaped like build_report's, small enough to write by hand."""
    return unmarshal(
        make_data(
            run_id,
            started_at,
            suite=suite,
            target=target,
            outcome=outcome,
            case_ids=case_ids,
            **more,
        )
    )


def with_cases(report: RunReport, *entries: CaseEntry) -> RunReport:
    return dataclasses.replace(report, cases=entries)


def ordered(value: Any) -> str:
    """``value`` as JSON text, its keys in their order: equal only when the order is."""
    return json.dumps(value)


def evaluated_report() -> RunReport:
    """A real report of build_report, compared with a baseline so every optional part is there."""
    cases = [case("alpha", ["a"], tags=("dev",)), case("neg", []), case("free")]
    suite = SuiteConfig(cases="suite.yaml", targets=["search"])
    baseline = run([(cases[0], answer(["a", "b"])), (cases[2], answer(["x"], [0.4]))], "base")
    current = dataclasses.replace(
        run(
            [
                (cases[0], answer(["b", "a"], [0.8, 0.7])),
                (cases[1], answer(["n"], [0.9])),
                (cases[2], answer([], outcome="timeout")),
            ],
            "current",
        ),
        started_at=NOW,
    )
    return build_report(evaluate(current, settings_for(suite), baseline))


def count_rows(url: str, table: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


# Saving and reading back -----------------------------------------------------------------------


def test_saved_report_reads_back_equal_with_keys_in_order(store: Store) -> None:
    """A real build_report report comes back equal, and marshals to the same JSON text."""
    report = evaluated_report()
    assert report.cases[0].vs_baseline  # the comparison parts are really exercised
    store.save_run(report)
    got = store.get_report("current")
    assert got == report
    assert got is not None
    assert ordered(marshal(got)) == ordered(marshal(report))


def test_a_fingerprint_reads_back_with_the_report_and_its_head(store: Store) -> None:
    """The fingerprint is part of the run's head (``runs.report``): the full report and the
    heads the pages and `baseline show` read both give it back, untold values left out."""
    fingerprint = Fingerprint(
        "3f9a1c0e7b21", "a04c5e11d9b0", "6de2f0a9c113", "bge-small", 384, 2970,
        {"hnsw.ef_search": 100, "hnsw.space": "cosine"},
    )  # fmt: skip
    report = dataclasses.replace(evaluated_report(), fingerprint=fingerprint)
    untold = dataclasses.replace(
        make_report("r2", NOW + timedelta(minutes=5)),
        fingerprint=Fingerprint("3f9a1c0e7b21", "a04c5e11d9b0", "6de2f0a9c113"),
    )
    store.save_run(report)
    store.save_run(untold)
    got = store.get_report("current")
    assert got == report
    assert got is not None
    assert ordered(marshal(got)) == ordered(marshal(report))
    heads = run_heads(store, ["current", "r2"])
    assert heads["current"].fingerprint == fingerprint
    assert heads["r2"].fingerprint == untold.fingerprint
    assert store.get_report("r2") == untold


def test_a_ranking_equal_to_an_earlier_runs_is_stored_once(store: Store, store_url: str) -> None:
    """Runs whose canaries answer alike add answers rows, not the rankings again, and each
    still reads back whole with its own latency."""
    first = make_report("r1")
    again = make_report("r2", NOW + timedelta(minutes=5))
    again = with_cases(
        again,
        *(
            dataclasses.replace(c, ids=f.ids, latency_s=0.5)
            for c, f in zip(again.cases, first.cases, strict=True)
        ),
    )
    store.save_run(first)
    store.save_run(again)
    assert count_rows(store_url, "rankings") == 2
    assert count_rows(store_url, "answers") == 4
    assert store.get_report("r1") == first
    assert store.get_report("r2") == again


def test_each_run_naming_a_ranking_read_before_gets_its_own_latency_and_vector(
    store: Store,
) -> None:
    """A ranking's case entry is made once per store (store.remembered); every run that
    names it still reads back with its own latency and query vector, in any order."""
    base = with_vectors(make_report("r1"))
    later = [
        with_cases(
            make_report(run_id, NOW + timedelta(minutes=i + 1)),
            *(dataclasses.replace(c, latency_s=latency) for c in make_report("r1").cases),
        )
        for i, (run_id, latency) in enumerate((("r2", 0.5), ("r3", None), ("r4", 0.125)))
    ]
    later[-1] = with_vectors(later[-1])  # the newest run keeps its vectors
    store.save_run(base)
    store.set_baseline("core", "search", "r1")
    for report in later:
        store.save_run(report)
    for report in (base, *later, later[0], base):
        assert store.get_report(report.run_id) == report
    assert [c.latency_s for c in later[1].cases] == [None, None]


def test_a_store_that_forgot_what_it_read_reads_it_again_the_same(store: Store) -> None:
    report = evaluated_report()
    store.save_run(report)
    first = store.get_report("current")
    history = store.case_history("core", "alpha")
    store.forget()
    assert store.get_report("current") == first == report
    assert store.case_history("core", "alpha") == history


def _stored_rankings(url: str) -> list[Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            keys = conn.execute(sqlalchemy.select(rankings.c.ranking_key)).scalars().all()
            return list(shared_values(conn, rankings, keys).values())
    finally:
        engine.dispose()


def test_a_ranking_holds_the_case_entry_but_its_latency(store: Store, store_url: str) -> None:
    """The latency differs every run: it is kept beside the ranking, never inside it."""
    store.save_run(make_report("r1"))
    rankings = _stored_rankings(store_url)
    assert sorted(r["id"] for r in rankings) == ["alpha", "beta"]
    assert all(r["latency_s"] is None for r in rankings)
    assert rankings[0]["ids"][0].endswith("-doc")


def test_unknown_run_reads_as_none(store: Store) -> None:
    """Asking for a run that was never saved gives None, not an error."""
    assert store.get_report("nope") is None


def test_saving_a_run_twice_keeps_the_first_copy_only(store: Store, store_url: str) -> None:
    """A retried save is harmless: one run, one set of result rows, the first content."""
    first = make_report("r1")
    store.save_run(first)
    store.save_run(first)
    store.save_run(dataclasses.replace(make_report("r1"), outcome="regression"))
    assert store.get_report("r1") == first
    assert [r["run_id"] for r in store.list_runs()] == ["r1"]
    assert count_rows(store_url, "answers") == 2


ODD_TEXT = ("NUL \x00 byte", "lone \ud800", "unit\x1fseparator", "ünï")


@pytest.mark.parametrize(
    "entry",
    [
        # Empty wherever a value may be (an outcome never is: unmarshal reads "" as unset).
        pytest.param(CaseEntry("bare", "", "", "ok", (), (), None, None, {}), id="all-empty"),
        pytest.param(
            CaseEntry(
                id="x",
                query="lone \ud800",
                kind="NUL \x00",
                outcome="ok",
                ids=(*ODD_TEXT, "[json-like]", "d" * 10_000),
                scores=(0.9, 0.8, 0.7, 0.6, 0.5, 0.4),
                latency_s=0.1,
                error="NUL \x00 byte",
                metrics=dict.fromkeys(ODD_TEXT, 1.0),
                vs_baseline=CaseComparison(0.5, 0.5, ODD_TEXT, ("lone \udfff",), 0.1),
            ),
            id="odd-text",
        ),
        pytest.param(
            CaseEntry(
                "c" + "\x1f" * 98 + "é" + "d" * 100, "q", "", "ok", ("a",), (1.0,), 0.1, None, {}
            ),
            id="longest-case-id-with-the-id-separator",
        ),
        pytest.param(
            CaseEntry(
                id="x",
                query="q",
                kind="labelled",
                outcome="timeout",
                ids=("a", "b"),
                scores=(None, None),
                latency_s=None,
                error=None,
                metrics={"rr": None},
                vs_baseline=CaseComparison(None, None, (), (), None),
                embedding_cosine=None,  # a null, not a key left out
            ),
            id="nulls",
        ),
        pytest.param(
            CaseEntry(
                id="x",
                query="q",
                kind="labelled",
                outcome="ok",
                ids=("n", "o"),
                scores=(0.9, -0.0),
                latency_s=0.25,
                error=None,
                metrics={"rr": 0.5},
                vs_baseline=CaseComparison(0.5, 0.25, ("n",), ("p",), -0.1),
                embedding_cosine=0.99,
                query_vector="AACAPw==",
            ),
            id="every-optional-part",
        ),
    ],
)
def test_unusual_case_entries_round_trip_exactly(store: Store, entry: CaseEntry) -> None:
    """Text the columns cannot hold (NUL, lone surrogates, the id separator, long ids), empty
    values and nulls come back exactly; a null stays a null, a key left out stays out."""
    report = with_cases(make_report("r1"), entry)
    store.save_run(report)
    got = store.get_report("r1")
    assert got == report
    assert got is not None
    assert ordered(marshal(got)) == ordered(marshal(report))


def _read(case_id: str, **written: Any) -> dict[str, Any]:
    """The entry marshal writes for a case whose JSON held only ``case_id`` and ``written``."""
    entry: dict[str, Any] = {
        "id": case_id,
        "query": "",
        "kind": "",
        "outcome": "ok",
        "ids": [],
        "scores": [],
        "latency_s": None,
        "error": None,
        "metrics": {},
    }
    return entry | written


@pytest.mark.parametrize(
    ("entry", "read"),
    [
        pytest.param({"id": "bare"}, _read("bare"), id="only-an-id"),
        pytest.param(
            {"id": "x", "latency_s": 3, "kind": 7},
            _read("x", kind="7", latency_s=3.0),
            id="values-of-other-types",
        ),
        pytest.param(
            {"id": "x", "ids": None, "metrics": None, "error": None}, _read("x"), id="nulls"
        ),
        pytest.param(
            {"id": "x", "vs_baseline": {"rbo": 0.5}, "note": [1, {"a": None}]},
            _read(
                "x",
                vs_baseline={
                    "rbo": 0.5,
                    "jaccard": None,
                    "entered": [],
                    "left": [],
                    "top_score_delta": None,
                },
            ),
            id="extra",
        ),
        pytest.param(
            {"metrics": {"rr": 1.0}, "id": "x", "ids": ["a"]},
            _read("x", ids=["a"], metrics={"rr": 1.0}),
            id="keys-out-of-order",
        ),
    ],
)
def test_a_hand_written_case_entry_reaches_the_store_as_unmarshal_reads_it(
    store: Store, entry: dict[str, Any], read: dict[str, Any]
) -> None:
    """Keys left out, values of other types and unknown keys of a case entry written by hand
    never reach the store: unmarshal reads them (as empty, None or text) and drops what it
    does not know, and the run comes back as marshal writes it, keys in its order."""
    report = unmarshal({**make_data("r1"), "cases": [entry]})
    store.save_run(report)
    got = store.get_report("r1")
    assert got == report
    assert got is not None
    assert ordered(marshal(got)["cases"]) == ordered([read])


# Any text at all, NUL and lone surrogates too: a target may answer them.
_text = st.text(
    st.characters(exclude_categories=()) | st.sampled_from("\x00\ud800\udfff\x1fé"), max_size=8
)
_number = st.none() | st.floats(allow_nan=False, allow_infinity=False)
_texts = st.lists(_text, max_size=3).map(tuple)
_typed_entries = st.builds(
    CaseEntry,
    # Case ids are plain text: no NUL, no lone surrogates (save_run refuses those).
    id=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
    query=_text,
    kind=_text,
    outcome=st.sampled_from(OUTCOMES) | _text.filter(bool),  # "" reads as unset
    ids=_texts,
    scores=st.lists(_number, max_size=3).map(tuple),
    latency_s=_number,
    error=st.none() | _text,
    metrics=st.dictionaries(_text, _number, max_size=3),
    vs_baseline=st.none() | st.builds(CaseComparison, _number, _number, _texts, _texts, _number),
    embedding_cosine=st.just(ABSENT) | _number,
    query_vector=st.none() | _text | st.just("AACAPw=="),
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_written_entries = st.fixed_dictionaries(
    {"id": st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)},
    optional={
        key: _json
        for key in ("query", "kind", "outcome", "ids", "scores", "latency_s", "error", "metrics")
    }
    | {"vs_baseline": _json, "something_new": _json},
)
_run_ids = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        _typed_entries | _written_entries.map(unmarshal_case),
        max_size=4,
        unique_by=lambda entry: entry.id,  # as suites have them (a run refuses two alike)
    )
)
def test_any_case_entries_round_trip(store: Store, entries: list[CaseEntry]) -> None:
    """Whatever a case entry holds (or a hand-written one was read as), get_report returns it
    equal, and marshal writes it the same."""
    number = next(_run_ids)
    # Each run the newest of its pair, so that it keeps its query vectors.
    report = with_cases(make_report(f"prop-{number}", NOW + timedelta(minutes=number)), *entries)
    store.save_run(report)
    got = store.get_report(report.run_id)
    assert got == report
    assert got is not None
    assert ordered(marshal(got)) == ordered(marshal(report))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"run_id": None}, "no run_id"),
        ({"suite": ""}, "empty suite"),
        ({"target": "t" * 201}, "target too long"),
        ({"run_id": "nul\x00"}, "NUL in run_id"),
        ({"suite": "lone \ud800"}, "lone surrogate in suite"),
        ({"cases": [{"id": "c" * 201}]}, "case id too long"),
        ({"cases": [{"id": "nul\x00"}]}, "NUL in a case id"),
        ({"outcome": None}, "no outcome"),
        ({"outcome": "x" * 40}, "outcome too long"),
    ],
)
def test_malformed_reports_are_refused_and_store_nothing(
    store: Store, change: dict[str, Any], why: str
) -> None:
    """A report the columns cannot hold is a StorageError, not Unavailable: retrying is futile."""
    with pytest.raises(StorageError) as raised:
        store.save_run(unmarshal({**make_data("bad"), **change}))
    assert not isinstance(raised.value, StorageUnavailable), why
    assert store.list_runs() == []


@pytest.mark.parametrize(
    ("change", "where", "read"),
    [
        pytest.param(
            {"started_at": "yesterday"},
            ("started_at",),
            "1970-01-01T00:00:00+00:00",
            id="started_at not ISO",
        ),
        pytest.param({"coverage": "high"}, ("coverage",), None, id="coverage not a number"),
        pytest.param({"cases": {"alpha": {}}}, ("cases",), [], id="cases not a list"),
        pytest.param({"cases": [{"query": "no id"}]}, ("cases", 0, "id"), "", id="case without id"),
        pytest.param({"metrics": {"mrr": math.nan}}, ("metrics",), {"mrr": None}, id="NaN"),
        pytest.param({"metrics": {"when": NOW}}, ("metrics",), {"when": None}, id="not JSON"),
        pytest.param({"duration_s": math.inf}, ("duration_s",), None, id="infinite duration"),
        pytest.param(
            {"cases": [{"id": "a", "scores": [0.9, math.nan]}]},
            ("cases", 0, "scores"),
            [0.9, None],
            id="NaN score",
        ),
        pytest.param(
            {"cases": [{"id": "a", "latency_s": math.nan}]},
            ("cases", 0, "latency_s"),
            None,
            id="NaN latency",
        ),
        pytest.param(
            {"cases": [{"id": "a", "metrics": {"rr": -math.inf}}]},
            ("cases", 0, "metrics"),
            {"rr": None},
            id="infinite metric",
        ),
        pytest.param(
            {"cases": [{"id": "a", "vs_baseline": {"when": NOW}}]},
            ("cases", 0, "vs_baseline", "rbo"),
            None,
            id="case value not JSON",
        ),
        pytest.param(
            {"cases": [{"id": "a", "ids": [{1, 2}]}]},
            ("cases", 0, "ids"),
            ["{1, 2}"],
            id="a set among the ids",
        ),
    ],
)
def test_what_a_report_cannot_hold_is_read_as_missing_and_never_reaches_the_store(
    store: Store, change: dict[str, Any], where: tuple[str | int, ...], read: Any
) -> None:
    """A report's JSON with a value of another type (or NaN, infinity, an object JSON cannot
    hold) reads as a report without it (None, empty, the epoch, its text): the store only
    ever sees plain JSON, and keeps the run as it was read."""
    report = unmarshal({**make_data("odd"), **change})
    store.save_run(report)
    got = store.get_report("odd")
    assert got == report
    assert got is not None
    stored: Any = marshal(got)
    for key in where:
        stored = stored[key]
    assert stored == read
    json.dumps(marshal(got), allow_nan=False)  # plain JSON throughout


def test_what_is_not_finite_is_stored_as_null(store: Store) -> None:
    """A report holding NaN or infinity (none of build_report's does) is written with null in
    their place: the run's columns, its JSON and its cases' history never hold either."""
    report = make_report("r1")
    alpha, beta = report.cases
    report = dataclasses.replace(
        report,
        duration_s=math.inf,
        coverage=math.nan,
        metrics={"mrr": math.nan},
        cases=(
            dataclasses.replace(alpha, scores=(math.nan, 0.5), latency_s=math.nan),
            dataclasses.replace(beta, metrics={"rr": -math.inf}),
        ),
    )
    store.save_run(report)
    got = store.get_report("r1")
    assert got is not None
    assert marshal(got) == marshal(report)
    assert (got.duration_s, got.coverage, got.metrics) == (None, None, {"mrr": None})
    assert (got.cases[0].scores, got.cases[0].latency_s) == ((None, 0.5), None)
    assert got.cases[1].metrics == {"rr": None}
    (summary,) = store.list_runs()
    assert (summary["duration_s"], summary["coverage"], summary["metrics"]) == (
        None,
        None,
        {"mrr": None},
    )
    (point,) = store.case_history("core", "alpha")
    assert (point["top_score"], point["latency_s"]) == (None, None)


def test_a_case_the_columns_cannot_hold_is_refused_naming_its_report(store: Store) -> None:
    """Case ids are checked before anything is written; the error says which report."""
    report = make_report("bad")
    alpha, beta = report.cases
    report = with_cases(report, alpha, dataclasses.replace(beta, id="lone \ud800"))
    with pytest.raises(StorageError, match=r"^report 'bad': every case needs an id of plain"):
        store.save_run(report)
    assert store.list_runs() == []
    assert store.get_report("bad") is None


def test_concurrent_writers_all_succeed(store_url: str) -> None:
    """Two stores on one database, writing from several threads at once, lose nothing."""
    with Store.from_url(store_url) as one, Store.from_url(store_url) as two:
        one.migrate()
        stores = [one, two]
        at = [NOW + timedelta(minutes=i) for i in range(24)]
        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(lambda i: stores[i % 2].save_run(make_report(f"r{i}", at[i])), range(24)))
        assert len(one.list_runs(limit=100)) == 24


# Listing --------------------------------------------------------------------------------------


@pytest.fixture
def listed(store: Store) -> Store:
    for run_id, minutes, suite, target in [
        ("b", 20, "core", "search"),
        ("a", 10, "core", "search"),
        ("d", 40, "core", "other"),
        ("c", 30, "extra", "search"),
    ]:
        store.save_run(
            make_report(run_id, NOW + timedelta(minutes=minutes), suite=suite, target=target)
        )
    return store


@pytest.mark.parametrize(
    ("suite", "target", "limit", "expected"),
    [
        (None, None, 50, ["d", "c", "b", "a"]),
        ("core", None, 50, ["d", "b", "a"]),
        (None, "search", 50, ["c", "b", "a"]),
        ("core", "search", 50, ["b", "a"]),
        ("core", "search", 1, ["b"]),
        (None, None, 0, []),
        ("nope", None, 50, []),
    ],
)
def test_list_runs_is_newest_first_and_filtered(
    listed: Store, suite: str | None, target: str | None, limit: int, expected: list[str]
) -> None:
    """Runs are listed newest first, narrowed by suite and target, at most ``limit``."""
    assert [r["run_id"] for r in listed.list_runs(suite, target, limit)] == expected


def test_list_runs_gives_summaries_with_aware_utc_times(listed: Store) -> None:
    """A summary row holds the run's headline fields and a UTC started_at."""
    newest = listed.list_runs(limit=1)[0]
    assert set(newest) == SUMMARY_KEYS
    assert newest["started_at"] == NOW + timedelta(minutes=40)
    assert newest["started_at"].utcoffset() == timedelta(0)
    assert newest["metrics"] == {"hit_rate@5": 1.0, "mrr": 0.75}
    assert (newest["outcome"], newest["coverage"], newest["duration_s"]) == ("ok", 1.0, 1.25)


def test_a_summary_carries_the_deltas_against_the_baseline_or_none(store: Store) -> None:
    """The deltas come out of the stored report: present with a baseline, None without."""
    deltas = {"hit_rate@5": -0.25, "mrr": 0.0}
    compared = make_report(
        "compared", NOW + timedelta(minutes=5), baseline={"run_id": "first", "deltas": deltas}
    )
    store.save_run(make_report("first"))
    store.save_run(compared)
    newest, first = store.list_runs()
    assert newest["deltas"] == {"hit_rate@5": -0.25, "mrr": 0.0}
    assert first["deltas"] is None
    assert store.latest_run("core", "search") == newest


def test_offsets_are_compared_as_instants_and_reports_keep_their_text(store: Store) -> None:
    """12:00 written as 14:00+02:00 sorts before 12:30Z, and reads back as 12:00 UTC."""
    east = datetime(2026, 11, 22, 14, 0, tzinfo=timezone(timedelta(hours=2))).isoformat()
    store.save_run(make_report("east", east))
    store.save_run(make_report("utc", NOW + timedelta(minutes=30)))
    runs = store.list_runs()
    assert [r["run_id"] for r in runs] == ["utc", "east"]
    assert runs[1]["started_at"] == NOW
    assert runs[1]["started_at"].tzinfo == UTC
    kept = store.get_report("east")
    assert kept is not None
    assert kept.started_at == datetime.fromisoformat(east)
    assert marshal(kept)["started_at"] == east


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "regressed"),
        ({"outcome": "ok"}, "good"),
        ({"exclude_unavailable": False}, "down"),
        ({"outcome": "unavailable", "exclude_unavailable": False}, "down"),
        ({"outcome": "unavailable"}, None),
    ],
)
def test_latest_run_picks_the_newest_matching_run(
    store: Store, kwargs: dict[str, Any], expected: str | None
) -> None:
    """latest_run skips unavailable runs by default and can ask for one outcome."""
    for minutes, (run_id, outcome) in enumerate(
        [("good", "ok"), ("regressed", "regression"), ("down", "unavailable")]
    ):
        store.save_run(make_report(run_id, NOW + timedelta(minutes=minutes), outcome=outcome))
    store.save_run(make_report("elsewhere", NOW + timedelta(hours=1), target="other"))
    latest = store.latest_run("core", "search", **kwargs)
    assert (latest["run_id"] if latest else None) == expected
    assert latest is None or set(latest) == SUMMARY_KEYS


def test_latest_run_of_an_empty_pair_is_none(store: Store) -> None:
    """No runs yet: None."""
    assert store.latest_run("core", "search") is None


# Baselines ------------------------------------------------------------------------------------


def test_baseline_is_pinned_replaced_and_survives_a_new_store(store_url: str) -> None:
    """A pinned baseline is kept in the database: a restarted daemon sees it."""
    now = [NOW]
    with Store(make_engine(store_url), clock=lambda: now[-1]) as store:
        store.migrate()
        assert store.get_baseline("core", "search") is None
        for run_id in ("r1", "r2"):
            store.save_run(make_report(run_id))
        store.save_run(make_report("o1", suite="extra"))
        store.set_baseline("core", "search", "r1")
        now.append(NOW + timedelta(hours=1))
        store.set_baseline("core", "search", "r2")
    with Store.from_url(store_url) as restarted:
        restarted.migrate()
        restarted.set_baseline("extra", "search", "o1")
        assert restarted.get_baseline("core", "search") == "r2"
        rows = restarted.baselines()
    assert [(b["suite"], b["target"], b["run_id"]) for b in rows] == [
        ("core", "search", "r2"),
        ("extra", "search", "o1"),
    ]
    assert rows[0]["set_at"] == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("suite", "target", "run_id", "message"),
    [
        ("core", "search", "missing", "no run 'missing'"),
        ("extra", "search", "r1", "is of suite 'core' on target 'search'"),
        ("core", "other", "r1", "not 'core' on 'other'"),
    ],
)
def test_set_baseline_refuses_unknown_or_foreign_runs(
    store: Store, suite: str, target: str, run_id: str, message: str
) -> None:
    """Only a stored run of the same suite and target can be pinned."""
    store.save_run(make_report("r1"))
    with pytest.raises(StorageError, match=message):
        store.set_baseline(suite, target, run_id)
    assert store.get_baseline(suite, target) is None


# History --------------------------------------------------------------------------------------


@pytest.fixture
def history(store: Store) -> Store:
    saved = [
        ("t2", 120, "core", "search", "regression"),
        ("t1", 60, "core", "search", "ok"),
        ("o1", 90, "core", "other", "ok"),
        ("t3", 180, "core", "search", "ok"),
        ("x1", 100, "extra", "search", "ok"),  # same case id, another suite
        ("n1", 150, "core", "search", "ok"),  # a run without that case
    ]
    for run_id, minutes, suite, target, outcome in saved:
        cases = ("beta",) if run_id == "n1" else ("alpha", "beta")
        at = NOW + timedelta(minutes=minutes)
        store.save_run(
            make_report(run_id, at, suite=suite, target=target, outcome=outcome, case_ids=cases)
        )
    return store


@pytest.mark.parametrize(
    ("target", "since_minutes", "expected"),
    [
        (None, None, ["t1", "o1", "t2", "t3"]),
        ("search", None, ["t1", "t2", "t3"]),
        (None, 90, ["o1", "t2", "t3"]),  # since is inclusive
        ("other", 100, []),
    ],
)
def test_case_history_is_oldest_first_within_suite_target_and_since(
    history: Store, target: str | None, since_minutes: int | None, expected: list[str]
) -> None:
    """One canary over time: only its suite's runs, optionally one target, from ``since`` on."""
    since = None if since_minutes is None else NOW + timedelta(minutes=since_minutes)
    rows = history.case_history("core", "alpha", target=target, since=since)
    assert [r["run_id"] for r in rows] == expected


def test_case_history_rows_hold_the_case_answer(history: Store) -> None:
    """Each point has the case's ids, top score and outcome, and the run's context."""
    point = history.case_history("core", "alpha", target="search")[1]
    assert point == {
        "run_id": "t2",
        "started_at": NOW + timedelta(minutes=120),
        "target": "search",
        "run_outcome": "regression",
        "outcome": "ok",
        "error": None,
        "latency_s": 0.02,
        "top_score": 0.9,
        "ids": ["alpha-doc", "t2-doc"],
        "verdict": "ok",  # the run regressed, but its verdict named no failure of alpha
    }


def _judged(run_id: str) -> RunReport:
    """A report whose judgement names its cases: alpha regressed, neg leaked, weak missed its
    min_score, down went unanswered (and listed as regressed all the same), beta passed."""
    data = make_data(run_id, case_ids=("alpha", "neg", "weak", "down", "beta"))
    data["cases"][3] |= {"outcome": "timeout", "ids": [], "scores": [], "error": "timed out"}
    failure = {"metric": None, "message": "..."}
    data["failures"] = [
        {**failure, "kind": "negative_leak", "case": "neg"},
        {**failure, "kind": "min_score", "case": "weak"},
        {**failure, "kind": "drop", "metric": "mrr", "case": None},
    ]
    drop = {"metric": "rr", "baseline": 1.0, "current": 0.5}
    data["regressions"] = [{**drop, "case": "alpha"}, {**drop, "case": "down"}]
    return unmarshal(data)


JUDGED = {
    "alpha": "regressed",
    "neg": "leaked",
    "weak": "missed_min_score",
    "down": "unanswered",
    "beta": "ok",
}


def test_each_point_holds_the_canarys_verdict_as_its_run_judged_it(store: Store) -> None:
    """The verdict of a canary is what its run's regressions and failures say of it."""
    store.save_run(_judged("r1"))
    got = {case: store.case_history("core", case)[0]["verdict"] for case in JUDGED}
    assert got == JUDGED


def test_upgrade_to_version_6_gives_every_stored_point_its_verdict(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    """Version 6 adds points.verdict; upgrading fills it in from each run's judgement."""
    reports = [_judged("r1"), make_report("r2", NOW + timedelta(minutes=5))]
    for report in reports:
        store.save_run(report)
    expected = {case: store.case_history("core", case) for case in JUDGED}
    old_url = f"sqlite:///{tmp_path / 'version5.db'}"
    write_version6(old_url, reports)
    engine = make_engine(old_url)
    with engine.begin() as conn:  # now it is a database as version 5 left it
        conn.execute(sqlalchemy.text("ALTER TABLE points DROP COLUMN verdict"))
        conn.execute(sqlalchemy.text("DELETE FROM schema_version"))
        conn.execute(
            sqlalchemy.text("INSERT INTO schema_version (version, applied_at) VALUES (5, :at)"),
            {"at": NOW.replace(tzinfo=None)},
        )
    engine.dispose()
    with Store.from_url(old_url) as upgraded:
        assert upgraded.schema_version() == 5
        upgraded.migrate()
        assert upgraded.schema_version() == LATEST
        assert {case: upgraded.case_history("core", case) for case in JUDGED} == expected
    assert [rows[0]["verdict"] for rows in expected.values()] == list(JUDGED.values())


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param(
            {"id": "alpha", "outcome": "timeout", "ids": [], "scores": [], "error": "timed out"},
            {"outcome": "timeout", "error": "timed out", "ids": [], "top_score": None},
            id="unanswered",
        ),
        pytest.param(
            {"id": "alpha", "outcome": "ok", "ids": ["a"], "scores": [None], "latency_s": 0.1},
            {"outcome": "ok", "error": None, "ids": ["a"], "top_score": None, "latency_s": 0.1},
            id="no-scores",
        ),
        pytest.param(
            {
                "id": "alpha",
                "outcome": "bad_response",
                "ids": [],
                "scores": [],
                "latency_s": 2.0,
                "error": "NUL \x00 and lone \ud800",
            },
            {
                "outcome": "bad_response",
                "error": None,
                "ids": [],
                "top_score": None,
                "latency_s": 2.0,
            },
            id="text-the-databases-refuse",
        ),
    ],
)
def test_case_history_leaves_out_what_a_history_cannot_show(
    store: Store, entry: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Missing values, and text the history's columns cannot hold, read as None in the
    history; the full report keeps them."""
    report = unmarshal({**make_data("r1"), "cases": [entry]})
    store.save_run(report)
    (point,) = store.case_history("core", "alpha")
    wanted = {"latency_s": None} | expected
    assert {key: point[key] for key in wanted} == wanted
    assert store.get_report("r1") == report


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param([], id="none"),
        pytest.param(["", "a b", "ünï", "[json-like]"], id="plain"),
        pytest.param(["unit\x1fseparator", "b"], id="separator"),
        pytest.param(["nul\x00", "lone \ud800"], id="text-databases-refuse"),
        pytest.param(["1", "null", '["x"]', "nul\x00"], id="json-text"),
    ],
)
def test_case_history_gives_the_ids_back_exactly(store: Store, ids: list[str]) -> None:
    """Whatever the ids are, the history shows them as the report had them."""
    report = make_report("r1")
    store.save_run(with_cases(report, dataclasses.replace(report.cases[0], ids=tuple(ids))))
    assert [p["ids"] for p in store.case_history("core", "alpha")] == [ids]


@given(ids=st.lists(st.text(max_size=4) | st.integers(), max_size=5))
def test_encoded_ids_decode_to_the_same_list(ids: list[Any]) -> None:
    """decode_ids inverts encode_ids on any list of ids."""
    assert decode_ids(encode_ids(ids)) == ids


def test_a_report_listing_a_case_twice_is_refused_by_name(store: Store) -> None:
    """Suites refuse a case id used twice, so no run of the daemon has one; a report that
    does is refused whole with the id named, rather than stored with one answer lost."""
    report = make_report("r1")
    first, second = report.cases
    with pytest.raises(StorageError, match="two cases of id 'beta'"):
        store.save_run(with_cases(report, second, dataclasses.replace(first, id="beta")))
    assert store.get_report("r1") is None


@pytest.mark.parametrize(
    "call",
    [
        lambda s, naive: s.case_history("core", "alpha", since=naive),
        lambda s, naive: s.prune(naive, timedelta(days=1), timedelta(days=2)),
    ],
    ids=["case_history", "prune"],
)
def test_naive_datetimes_are_refused(store: Store, call: Any) -> None:
    """A datetime without a timezone is ambiguous; the store says so instead of guessing."""
    with pytest.raises(StorageError, match="no timezone"):
        call(store, datetime(2026, 11, 22, 12, 0))


# Retention ------------------------------------------------------------------------------------


def test_prune_keeps_failed_runs_longer_and_never_the_pinned_baseline(
    store: Store, store_url: str
) -> None:
    """Old ok runs go; regressed/unavailable ones stay for keep_failed; the baseline stays."""
    ages = {
        "old-ok": (40, "ok"),
        "recent-ok": (10, "ok"),
        "old-regression": (40, "regression"),
        "old-unavailable": (40, "unavailable"),
        "ancient-regression": (100, "regression"),
        "old-pinned": (40, "ok"),
    }
    for run_id, (days, outcome) in ages.items():
        store.save_run(make_report(run_id, NOW - timedelta(days=days), outcome=outcome))
    store.set_baseline("core", "search", "old-pinned")

    deleted = store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=90))

    assert deleted == 2
    assert {r["run_id"] for r in store.list_runs()} == {
        "recent-ok",
        "old-regression",
        "old-unavailable",
        "old-pinned",
    }
    assert store.get_report("old-ok") is None
    assert count_rows(store_url, "answers") == 4 * 2
    # Each run's rankings are its own (their ids name the run): the deleted runs' went too.
    assert count_rows(store_url, "rankings") == 4 * 2
    assert store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=90)) == 0


def test_failed_runs_are_never_kept_shorter_than_ok_runs(store: Store) -> None:
    """A keep_failed below keep does not make failed runs go first."""
    store.save_run(make_report("regressed", NOW - timedelta(days=10), outcome="regression"))
    assert store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=1)) == 0
    assert store.get_report("regressed") is not None


def test_prune_deletes_in_batches_until_done(store_url: str) -> None:
    """More expired runs than one batch are all deleted, and counted."""
    with Store(make_engine(store_url), prune_batch=2) as store:
        store.migrate()
        for i in range(5):
            store.save_run(make_report(f"r{i}", NOW - timedelta(days=40, minutes=i)))
        assert store.prune(NOW, timedelta(days=30), timedelta(days=90)) == 5
        assert store.list_runs() == []


def _ranking_rows(url: str) -> list[Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = sqlalchemy.select(rankings.c.ranking_key, rankings.c.dict_key)
            return list(conn.execute(query.order_by(rankings.c.ranking_key)).all())
    finally:
        engine.dispose()


def test_a_changed_ranking_is_stored_against_the_canarys_earlier_one(
    store: Store, store_url: str
) -> None:
    """A canary's new ranking is compressed against the one its last run stored (which is
    stored alone), and reads back exactly."""
    store.save_run(make_report("r1"))
    store.save_run(make_report("r2", NOW + timedelta(minutes=5)))  # every ranking new
    store.save_run(make_report("r3", NOW + timedelta(minutes=10)))
    rows = _ranking_rows(store_url)
    alone = [key for key, against in rows if against is None]
    assert len(alone) == 2  # r1's two rankings
    assert {against for _key, against in rows if against is not None} == set(alone)
    for run_id, minutes in (("r1", 0), ("r2", 5), ("r3", 10)):
        assert store.get_report(run_id) == make_report(run_id, NOW + timedelta(minutes=minutes))


def test_a_ranking_others_are_stored_against_outlives_its_runs_while_they_stay(
    store: Store, store_url: str
) -> None:
    """Pruning the run whose ranking a pinned baseline's ranking was compressed against keeps
    that ranking, so the baseline still reads back; once nothing needs them both go."""
    old = NOW - timedelta(days=40)
    store.save_run(make_report("first", old))
    store.save_run(make_report("pinned", old + timedelta(minutes=5)))
    store.set_baseline("core", "search", "pinned")
    assert store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=30)) == 1
    assert store.get_report("first") is None
    assert store.get_report("pinned") == make_report("pinned", old + timedelta(minutes=5))
    assert len(_ranking_rows(store_url)) == 4
    store.save_run(make_report("new", NOW))
    store.set_baseline("core", "search", "new")
    store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=30))
    assert store.get_report("pinned") is None
    # The new run's rankings are compressed alone: the pinned run's were too old to use.
    assert [against for _key, against in _ranking_rows(store_url)] == [None, None]
    assert store.get_report("new") == make_report("new", NOW)


def test_a_value_a_late_run_refers_to_while_pruning_looks_is_kept(
    store: Store, store_url: str
) -> None:
    """Pruning finds unreferenced values in a read, then deletes them a few at a time: a run
    stored in between (a late one, from the spool) that refers to one of them keeps it."""
    old = NOW - timedelta(days=40)
    store.save_run(make_report("gone", old))
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            expired = sqlalchemy.select(runs.c.run_id, runs.c.run_key, runs.c.suite)
            assert delete_runs(conn, expired.where(runs.c.run_id == "gone")) == 1
            found = find_unreferenced(conn, NOW - timedelta(days=30))
        assert len(found.rankings) == 2
        late = make_report("late", old + timedelta(minutes=1))
        late = with_cases(
            late, *(dataclasses.replace(c, ids=(f"{c.id}-doc", "gone-doc")) for c in late.cases)
        )
        store.save_run(late)  # answers as "gone" did: its rankings, found again
        with engine.begin() as conn:
            assert delete_values(conn, rankings, found.rankings, found) == 0
            assert delete_values(conn, run_parts, found.parts, found) == 0
    finally:
        engine.dispose()
    assert store.get_report("late") == late
    assert count_rows(store_url, "rankings") == 2


def test_run_numbers_are_never_given_twice(store: Store, store_url: str) -> None:
    """Pruning tells runs stored since it looked by their numbers: a number once given is
    never given again, even after its run was deleted."""
    store.save_run(make_report("first", NOW - timedelta(days=40)))
    store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=30))
    store.save_run(make_report("second", NOW))
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            numbers = conn.execute(sqlalchemy.select(runs.c.run_key)).scalars().all()
    finally:
        engine.dispose()
    assert numbers == [2]


@pytest.mark.parametrize("latency", [0.1234, 0.12345678901, 0.0, -0.0, 3000.5, 1e-9, None])
def test_a_latency_reads_back_exactly_whatever_its_digits(store: Store, latency: Any) -> None:
    """Whole microseconds are stored as an integer, anything else as it is: both exact."""
    report = make_report("r1")
    report = with_cases(report, dataclasses.replace(report.cases[0], latency_s=latency))
    store.save_run(report)
    got = store.get_report("r1")
    assert got == report
    assert got is not None
    # repr, since -0.0 == 0.0: the sign must come back too.
    assert repr(got.cases[0].latency_s) == repr(latency)
    assert [repr(p["latency_s"]) for p in store.case_history("core", "alpha")] == [repr(latency)]


# Query vectors --------------------------------------------------------------------------------


def with_vectors(report: RunReport) -> RunReport:
    """``report`` with a query vector in every case entry, as build_report writes them."""
    cases = [
        dataclasses.replace(c, query_vector=f"{report.run_id}/{c.id}/AACAPw==")
        for c in report.cases
    ]
    return with_cases(report, *cases)


def stored_vectors(store: Store, run_id: str) -> list[str | None]:
    report = store.get_report(run_id)
    assert report is not None
    return [c.query_vector for c in report.cases]


def test_query_vectors_are_kept_in_their_own_table_and_read_back(
    store: Store, store_url: str
) -> None:
    """A report's query vectors come back from get_report, and no ranking holds one."""
    report = with_vectors(make_report("r1"))
    store.save_run(report)
    assert store.get_report("r1") == report
    assert count_rows(store_url, "vectors") == 2
    assert not any("query_vector" in ranking for ranking in _stored_rankings(store_url))


def test_only_the_pinned_baseline_and_the_newest_run_keep_their_vectors(store: Store) -> None:
    """Vectors of runs no later run is compared with are deleted; the reports stay whole."""
    for i, run_id in enumerate(("r1", "r2", "r3")):
        store.save_run(with_vectors(make_report(run_id, NOW + timedelta(minutes=i))))
        if run_id == "r1":
            store.set_baseline("core", "search", "r1")
    store.save_run(with_vectors(make_report("other", NOW, target="elsewhere")))

    assert store.get_report("r1") == with_vectors(make_report("r1"))  # the pinned baseline
    assert stored_vectors(store, "r2") == [None, None]
    assert store.get_report("r2") == make_report("r2", NOW + timedelta(minutes=1))
    assert None not in stored_vectors(store, "r3")
    assert None not in stored_vectors(store, "other")  # another pair's newest run


def test_a_late_older_run_does_not_take_the_newest_runs_vectors(store: Store) -> None:
    """A run replayed from the spool after a newer one was stored keeps no vectors."""
    store.save_run(with_vectors(make_report("newer", NOW)))
    store.save_run(with_vectors(make_report("older", NOW - timedelta(minutes=5))))
    assert None not in stored_vectors(store, "newer")
    assert stored_vectors(store, "older") == [None, None]


def test_prune_deletes_the_vectors_of_the_runs_it_deletes(store: Store, store_url: str) -> None:
    store.save_run(with_vectors(make_report("old", NOW - timedelta(days=40))))
    assert count_rows(store_url, "vectors") == 2
    assert store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=90)) == 1
    assert count_rows(store_url, "vectors") == 0


# Schema versions ------------------------------------------------------------------------------


def _add_note_column(conn: sqlalchemy.Connection) -> None:
    conn.execute(sqlalchemy.text("ALTER TABLE runs ADD COLUMN note VARCHAR(200)"))


def _half_done(conn: sqlalchemy.Connection) -> None:
    _add_note_column(conn)
    conn.execute(sqlalchemy.text("ALTER TABLE no_such_table ADD COLUMN x INTEGER"))


def _run_columns(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return {column["name"] for column in sqlalchemy.inspect(engine).get_columns("runs")}
    finally:
        engine.dispose()


def test_migrate_twice_changes_nothing(store: Store, store_url: str) -> None:
    """A second migrate (every daemon start) keeps version and data."""
    store.save_run(make_report("r1"))
    store.migrate()
    assert store.schema_version() == LATEST
    assert count_rows(store_url, "schema_version") == 1
    assert store.get_report("r1") == make_report("r1")


def _digest_fillfactors(url: str) -> dict[str, list[str] | None]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sqlalchemy.text(
                    "SELECT relname, reloptions FROM pg_class WHERE relname IN "
                    "('rankings_digest', 'run_parts_digest') "
                    "AND relnamespace = to_regnamespace(current_schema())::oid"
                )
            ).all()
            return {name: options for name, options in rows}
    finally:
        engine.dispose()


def test_upgrade_to_version_8_fills_the_digest_buckets(store: Store, store_url: str) -> None:
    """A database version 7 made keeps its runs; on PostgreSQL its digests' hash indexes fill
    their buckets before they split, as a new database's do."""
    filled = ["fillfactor=100"]
    store.save_run(make_report("r1"))
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            # What version 7 had not: the changes table and baselines.reason (version 9), the
            # judgments table (version 10).
            conn.execute(sqlalchemy.text("DROP TABLE changes"))
            conn.execute(sqlalchemy.text("DROP TABLE judgments"))
            conn.execute(sqlalchemy.text("ALTER TABLE baselines DROP COLUMN reason"))
            conn.execute(sqlalchemy.text("UPDATE schema_version SET version = 7"))
            if conn.dialect.name == "postgresql":
                for index in ("rankings_digest", "run_parts_digest"):
                    conn.execute(sqlalchemy.text(f"ALTER INDEX {index} RESET (fillfactor)"))
    finally:
        engine.dispose()
    if store.dialect == "postgresql":
        assert _digest_fillfactors(store_url) == {"rankings_digest": None, "run_parts_digest": None}
    assert store.schema_version() == 7
    store.migrate()
    assert store.schema_version() == LATEST
    assert store.get_report("r1") == make_report("r1")
    if store.dialect == "postgresql":
        assert _digest_fillfactors(store_url) == {
            "rankings_digest": filled,
            "run_parts_digest": filled,
        }


@pytest.fixture
def version_1(store_url: str) -> Iterator[Store]:
    """A store whose code knows no upgrades: it creates the tables and calls them version 1."""
    with Store(make_engine(store_url), upgrades={}) as store:
        store.migrate()
        yield store


def test_upgrade_from_an_older_version_keeps_the_data(version_1: Store, store_url: str) -> None:
    """A version-1 database upgraded in place keeps its runs and baselines."""
    store = version_1
    store.save_run(make_report("r1"))
    store.set_baseline("core", "search", "r1")
    with Store(make_engine(store_url), upgrades={1: _add_note_column}) as newer:
        newer.migrate()
        assert newer.schema_version() == 2
        assert newer.get_report("r1") == make_report("r1")
        assert newer.get_baseline("core", "search") == "r1"
    assert "note" in _run_columns(store_url)


def test_a_failed_upgrade_rolls_back_completely(version_1: Store, store_url: str) -> None:
    """An upgrade that fails half-way leaves the old schema and data exactly as they were."""
    store = version_1
    store.save_run(make_report("r1"))
    with Store(make_engine(store_url), upgrades={1: _half_done}) as newer:
        with pytest.raises(StorageError) as raised:
            newer.migrate()
        assert not isinstance(raised.value, StorageUnavailable)
        assert newer.schema_version() == 1
    assert "note" not in _run_columns(store_url)
    assert store.get_report("r1") == make_report("r1")


def test_upgrade_to_version_2_builds_every_history_from_the_stored_results(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    """Version 2 adds the points table; upgrading fills it from the results of every run."""
    reports = [evaluated_report()] + [
        make_report(f"r{i:03d}", NOW + timedelta(minutes=i), case_ids=("alpha", "neg"))
        for i in range(migrations.BACKFILL_RUNS + 1)  # more runs than one backfill batch
    ]
    for report in reports:
        store.save_run(report)
    cases = ("alpha", "neg", "free")
    before = {case: store.case_history("core", case) for case in cases}
    assert all(before.values())
    # A case entry as an older ragcanary stored it, values of other types and all: no report
    # of today's holds one, but a database it upgrades may.
    odd_run = make_report("odd", NOW - timedelta(days=1), case_ids=())
    old_url = f"sqlite:///{tmp_path / 'version1.db'}"
    write_version6(old_url, [*reports, odd_run])
    odd = {"id": "alpha", "ids": "a", "scores": ["high"], "outcome": 3}
    engine = make_engine(old_url)
    with engine.begin() as conn:
        conn.execute(results_v6.insert(), [case_row("odd", 0, odd)])
    with engine.begin() as conn:  # now it is a database as version 1 created it
        for table in ("points", "vectors", "replicas", "claims", "candidates"):
            conn.execute(sqlalchemy.text(f"DROP TABLE {table}"))
        conn.execute(sqlalchemy.text("DELETE FROM schema_version"))
        conn.execute(
            sqlalchemy.text("INSERT INTO schema_version (version, applied_at) VALUES (1, :at)"),
            {"at": NOW.replace(tzinfo=None)},
        )
    engine.dispose()

    with Store.from_url(old_url) as upgraded:
        upgraded.migrate()
        assert upgraded.schema_version() == LATEST
        assert count_rows(old_url, "vectors") == 0  # version 3: the table, runs kept as they were
        assert count_rows(old_url, "claims") == 0  # version 4
        odd_point = {
            "run_id": "odd",
            "started_at": NOW - timedelta(days=1),
            "target": "search",
            "run_outcome": "ok",
            "outcome": None,
            "error": None,
            "latency_s": None,
            "top_score": None,
            "ids": None,
            "verdict": "unanswered",
        }
        after = {case: upgraded.case_history("core", case) for case in cases}
        assert after == before | {"alpha": [odd_point, *before["alpha"]]}
        assert upgraded.get_report("odd") == unmarshal({**marshal(odd_run), "cases": [odd]})
        for report in reports:
            assert upgraded.get_report(report.run_id) == report


def test_a_new_database_starts_at_the_newest_version_without_upgrades(store_url: str) -> None:
    """Upgrades only ever run on old databases; a new one is created as the tables say."""

    def must_not_run(conn: sqlalchemy.Connection) -> None:
        raise AssertionError("an upgrade ran on a new database")

    with Store(make_engine(store_url), upgrades={1: must_not_run}) as store:
        assert store.schema_version() is None
        store.migrate()
        assert store.schema_version() == 2  # the upgrades given lead to version 2


def test_a_database_newer_than_the_code_is_refused(store: Store, store_url: str) -> None:
    """An older ragcanary never writes into a schema it does not know."""
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(
            sqlalchemy.text("INSERT INTO schema_version (version, applied_at) VALUES (99, :at)"),
            {"at": NOW.replace(tzinfo=None)},
        )
    engine.dispose()
    with pytest.raises(StorageError, match="schema version 99 is newer"):
        store.migrate()


@pytest.mark.parametrize("upgrades", [{2: _add_note_column}, {1: _add_note_column, 3: _half_done}])
def test_upgrades_must_be_numbered_without_gaps(store_url: str, upgrades: dict[int, Any]) -> None:
    """A gap in the upgrade steps is a programming error, caught at construction."""
    with pytest.raises(ValueError, match="numbered"):
        Store(make_engine(store_url), upgrades=upgrades)


# Reachability ---------------------------------------------------------------------------------


# The PostgreSQL variant asks a closed TCP port (e2e: it talks over the network).
@pytest.fixture(
    params=[
        "sqlite-missing-directory",
        pytest.param("postgresql-closed-port", marks=pytest.mark.e2e),
    ]
)
def unreachable(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'gone' / 'ragcanary.db'}"
    return "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/test"


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.ping(),
        lambda s: s.migrate(),
        lambda s: s.save_run(make_report("r1")),
        lambda s: s.list_runs(),
        lambda s: s.get_baseline("core", "search"),
        lambda s: s.prune(NOW, timedelta(days=1), timedelta(days=2)),
    ],
    ids=["ping", "migrate", "save_run", "list_runs", "get_baseline", "prune"],
)
def test_unreachable_database_raises_storage_unavailable(unreachable: str, call: Any) -> None:
    """Every call says the database cannot be reached, names it, and hides its password."""
    with Store.from_url(unreachable) as store, pytest.raises(StorageUnavailable) as raised:
        call(store)
    message = str(raised.value)
    assert "cannot reach the database" in message
    assert "s3cret" not in message


@pytest.mark.parametrize(
    ("url", "message"),
    [("mysql://root@localhost/db", "not supported"), ("no url at all", "not valid")],
)
def test_unsupported_urls_are_refused_up_front(url: str, message: str) -> None:
    """Only SQLite and PostgreSQL are supported; anything else fails before connecting."""
    with pytest.raises(StorageError, match=message):
        Store.from_url(url)


def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_a_busy_timeout(sqlite_url: str) -> None:
    """Each SQLite connection is set up for one writer and many readers."""
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        }
    engine.dispose()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 10_000}


def test_list_runs_filters_by_outcome_and_start(store: Store) -> None:
    for minutes, (run_id, outcome) in enumerate([("a", "ok"), ("b", "regression"), ("c", "ok")]):
        store.save_run(
            make_report(run_id, started_at=NOW + timedelta(minutes=minutes), outcome=outcome)
        )
    assert [r["run_id"] for r in store.list_runs(outcome="ok")] == ["c", "a"]
    later = store.list_runs(since=NOW + timedelta(minutes=1))
    assert [r["run_id"] for r in later] == ["c", "b"]


# Replicas and claims ---------------------------------------------------------------------------


def test_a_tick_is_claimed_once_whoever_tries(store: Store) -> None:
    """The claims' primary key gives each (job, tick) to exactly one of racing replicas."""
    tick = NOW.replace(second=0)

    def attempt(replica: int) -> bool:
        return store.claim("core/search", tick, f"replica-{replica}", f"run-{replica}")

    with ThreadPoolExecutor(max_workers=6) as pool:
        won = list(pool.map(attempt, range(12)))
    assert won.count(True) == 1
    assert store.claim("core/search", tick + timedelta(seconds=2), "replica-0", "run-x")
    assert store.claim("core/other", tick, "replica-0", "run-y")


def test_heartbeats_list_every_replica_and_forget_the_long_gone(store_url: str) -> None:
    now = [NOW]
    with Store(make_engine(store_url), clock=lambda: now[0]) as store:
        store.migrate()
        store.heartbeat("b", NOW, "hash-1", "0.1.0")
        rows = store.heartbeat("a", NOW, "hash-2", "0.1.0")
        assert [(r["replica_id"], r["config_hash"]) for r in rows] == [
            ("a", "hash-2"),
            ("b", "hash-1"),
        ]
        now[0] = NOW + timedelta(days=2)
        rows = store.heartbeat("a", NOW, "hash-3", "0.1.0")
    assert [(r["replica_id"], r["config_hash"], r["seen_at"]) for r in rows] == [
        ("a", "hash-3", NOW + timedelta(days=2))
    ]


def test_latest_runs_give_the_newest_run_and_the_newest_answered_behind_an_outage(
    store: Store,
) -> None:
    store.save_run(make_report("old", NOW - timedelta(minutes=2)))
    store.save_run(make_report("answered", NOW - timedelta(minutes=1)))
    store.save_run(make_report("down", NOW, outcome="unavailable"))
    store.save_run(make_report("elsewhere", NOW, target="other"))
    latest = store.latest_runs([("core", "search"), ("core", "other"), ("core", "never")])
    assert latest == {
        ("core", "search"): [("down", NOW), ("answered", NOW - timedelta(minutes=1))],
        ("core", "other"): [("elsewhere", NOW)],
    }


def test_prune_deletes_claims_older_than_the_runs_kept(store: Store, store_url: str) -> None:
    store.claim("core/search", NOW - timedelta(days=40), "a", "r-old")
    store.claim("core/search", NOW - timedelta(days=1), "a", "r-new")
    store.prune(NOW, keep=timedelta(days=30), keep_failed=timedelta(days=90))
    assert count_rows(store_url, "claims") == 1


def test_answered_runs_are_the_newest_runs_that_were_not_unavailable(store: Store) -> None:
    store.save_run(make_report("old", NOW - timedelta(minutes=3)))
    store.save_run(make_report("mid", NOW - timedelta(minutes=2)))
    store.save_run(make_report("down", NOW - timedelta(minutes=1), outcome="unavailable"))
    store.save_run(make_report("new", NOW, case_ids=("alpha",)))
    assert store.answered_runs("core", "search", 2) == [
        ("new", NOW),
        ("mid", NOW - timedelta(minutes=2)),
    ]
    assert len(store.answered_runs("core", "search", 10)) == 3
    assert store.answered_runs("core", "search", 0) == []
    assert store.answered_runs("core", "elsewhere", 10) == []


def test_returned_by_gives_every_id_each_run_returned(store: Store) -> None:
    store.save_run(make_report("mid", NOW - timedelta(minutes=2)))
    store.save_run(make_report("new", NOW, case_ids=("alpha",)))
    assert store.returned_by("core", ["mid", "new", "absent"]) == {
        "mid": {"alpha-doc", "beta-doc", "mid-doc"},
        "new": {"alpha-doc", "new-doc"},
    }
    assert store.returned_by("other-suite", ["mid"]) == {}


def test_a_tick_another_replica_inserted_but_never_committed_is_taken(
    postgres_url: str,
) -> None:
    """A replica cut off between its claim's INSERT and COMMIT holds the row locked: the
    others give up on that tick within a second instead of counting storage as down."""
    with Store.from_url(postgres_url) as store:
        store.migrate()
        engine = make_engine(postgres_url)
        try:
            with engine.connect() as hung:
                hung.execute(
                    sqlalchemy.text(
                        "INSERT INTO claims (job, tick, replica_id, run_id, claimed_at) "
                        "VALUES ('core/search', :tick, 'cut-off', 'r-1', :tick)"
                    ),
                    {"tick": NOW},
                )  # no commit: the transaction stays open while the other replica claims
                assert store.claim("core/search", NOW, "healthy", "r-2") is False
                assert store.claim("core/search", NOW + timedelta(seconds=2), "healthy", "r-3")
        finally:
            engine.dispose()


def test_a_run_whose_tick_another_replica_took_over_is_not_stored(postgres_url: str) -> None:
    """A replica cut off and counted dead while its run was buffered: another ran the tick
    again (adopt_claim), so the late run would be the tick's second and is left out."""
    with Store(make_engine(postgres_url), clock=lambda: NOW) as store:  # claimed at NOW
        store.migrate()
        assert store.claim("core/search", NOW, "cut-off", "late-run")
        assert store.orphan_claims(["healthy"], NOW - timedelta(minutes=1), NOW) == [
            ("core/search", NOW, "cut-off")
        ]
        assert store.adopt_claim("core/search", NOW, "cut-off", "healthy", "rerun")
        assert not store.adopt_claim("core/search", NOW, "cut-off", "third", "again")
        claim = {"job": "core/search", "tick": NOW.isoformat(), "replica": "x"}
        store.save_run(make_report("rerun", claim=claim))
        store.save_run(make_report("late-run", claim=claim))
        assert [r["run_id"] for r in store.list_runs()] == ["rerun"]
        assert store.orphan_claims(["healthy"], NOW - timedelta(minutes=1), NOW) == []


def test_a_claim_whose_run_was_stored_after_it_was_found_orphaned_is_not_adopted(
    postgres_url: str,
) -> None:
    """The cut replica's run lands between another replica's orphan query and its adoption:
    adopting then would leave the stored run with no claim and run the tick a second time."""
    with Store(make_engine(postgres_url), clock=lambda: NOW) as store:  # claimed at NOW
        store.migrate()
        assert store.claim("core/search", NOW, "cut-off", "late-run")
        assert store.orphan_claims(["healthy"], NOW - timedelta(minutes=1), NOW) == [
            ("core/search", NOW, "cut-off")
        ]
        claim = {"job": "core/search", "tick": NOW.isoformat(), "replica": "cut-off"}
        store.save_run(make_report("late-run", claim=claim))  # reconnected meanwhile
        assert not store.adopt_claim("core/search", NOW, "cut-off", "healthy", "rerun")
        assert [r["run_id"] for r in store.list_runs()] == ["late-run"]


def test_a_late_save_and_an_adoption_racing_in_their_transactions_leave_one_run(
    postgres_url: str,
) -> None:
    """The cut replica's late save checks that its claim is still its own, then inserts its
    run; another replica's adoption checks that no run is stored, then takes the claim. Each
    check passes while the other's write is not committed yet, and the tick gets two runs,
    unless the two take turns on the claim's row. The test holds the save between its check
    and its insert (a lock on the runs table), adopts meanwhile, then lets the save go."""
    with Store(make_engine(postgres_url), clock=lambda: NOW) as store:
        store.migrate()
        assert store.claim("core/search", NOW, "cut-off", "late-run")
        claim = {"job": "core/search", "tick": NOW.isoformat(), "replica": "cut-off"}
        engine = make_engine(postgres_url)
        try:
            with engine.connect() as blocker, ThreadPoolExecutor(2) as pool:
                blocker.execute(sqlalchemy.text("LOCK TABLE runs IN EXCLUSIVE MODE"))
                saving = pool.submit(store.save_run, make_report("late-run", claim=claim))
                wait_until_waiting(blocker, 1)  # the save, at its insert
                adopting = pool.submit(
                    store.adopt_claim, "core/search", NOW, "cut-off", "healthy", "rerun"
                )
                # Unfixed, the adoption is done at once; fixed, it waits for the save.
                wait_until(lambda: adopting.done() or waiting(blocker) == 2)
                blocker.rollback()  # lets the save go on
                saving.result(timeout=30)
                adopted = adopting.result(timeout=30)
        finally:
            engine.dispose()
        stored = [r["run_id"] for r in store.list_runs()]
        assert (adopted, stored) in ((False, ["late-run"]), (True, []))
        assert adopted is False  # the save took the claim's row first


def waiting(conn: sqlalchemy.Connection) -> int:
    """How many sessions wait, directly or in a chain, for the locks ``conn`` holds."""
    query = """
        WITH RECURSIVE blocked(pid) AS (
            SELECT pid FROM pg_stat_activity WHERE :root = ANY(pg_blocking_pids(pid))
            UNION
            SELECT a.pid FROM pg_stat_activity a JOIN blocked b
                ON b.pid = ANY(pg_blocking_pids(a.pid))
        )
        SELECT count(*) FROM blocked
    """
    root = conn.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar_one()
    with conn.engine.connect() as other:
        return int(other.execute(sqlalchemy.text(query), {"root": root}).scalar_one())


def wait_until_waiting(conn: sqlalchemy.Connection, sessions: int) -> None:
    wait_until(lambda: waiting(conn) >= sessions)


def wait_until(condition: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_run_made_while_storage_was_down_claims_its_tick_when_stored(
    postgres_url: str,
) -> None:
    """The first replica of a job runs its ticks through a database outage unclaimed; storing
    such a run claims the tick, unless another replica claimed it meanwhile."""
    with Store.from_url(postgres_url) as store:
        store.migrate()
        tick = NOW.isoformat()
        unclaimed = {"job": "core/search", "tick": tick, "replica": "cut", "claimed": False}
        store.save_run(make_report("during-outage", claim=unclaimed))
        assert not store.claim("core/search", NOW, "other", "r-other")  # the tick is taken
        store.save_run(make_report("twin", NOW, claim={**unclaimed, "replica": "b"}))
        assert store.claim("core/search", NOW + timedelta(seconds=1), "other", "r-next")
        late = {**unclaimed, "tick": (NOW + timedelta(seconds=1)).isoformat()}
        store.save_run(make_report("late", claim=late))
        assert [r["run_id"] for r in store.list_runs()] == ["during-outage"]
