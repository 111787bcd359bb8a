"""The narrow reads the web pages add: a page of pending candidates, a run's stale labels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from factories import run_report

from ragcanary.measure.run_report import IndexLookup, StaleLabelEntry
from ragcanary.store import overview
from ragcanary.store.candidates import CandidateStore, FailureReport
from ragcanary.store.storage import Store

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _reports(key: str, signals: list[str], minute: int) -> list[FailureReport]:
    at = NOW + timedelta(minutes=minute)
    return [FailureReport(key, f"query {key}", s, at, target="t") for s in signals]


def test_a_page_of_pending_candidates_is_filtered_by_signal_in_the_database(
    store: Store,
) -> None:
    found = CandidateStore(store)
    found.add(
        [
            *_reports("a", ["thumbs_down"], 1),
            *_reports("b", ["rephrased", "thumbs_down", "other"], 2),
            *_reports("c", ["abandoned", "abandoned"], 3),
            *_reports("d", ["thumbs_down", "thumbs_down"], 4),
        ],
        max_pending=100,
    )
    done = found.pending_page(None, 10)[0][-1]["id"]
    found.close(done, "dismissed", "not ours")  # "a", the least reported

    def page(signal: str | None, limit: int, offset: int = 0) -> tuple[list[str], int]:
        rows, total = found.pending_page(signal, limit, offset)
        return [r["query"].removeprefix("query ") for r in rows], total

    assert page(None, 10) == (["b", "d", "c"], 3)  # most reported, then the latest
    assert page("thumbs_down", 10) == (["b", "d"], 2)
    assert page("thumbs_down", 1, 1) == (["d"], 2)
    assert page("abandoned", 10) == (["c"], 1)
    assert page("other", 10, 5) == ([], 1)


def test_a_runs_stale_labels_and_index_lookup_are_read_without_its_report(store: Store) -> None:
    labels = [{"case": "c1", "id": "d2", "reason": "missing", "looked_up_at": NOW.isoformat()}]
    lookup = {"at": NOW.isoformat(), "ids": 2, "left": ["d2"], "left_at": NOW.isoformat()}
    found = {"stale_labels": labels, "index_lookup": lookup}
    for run_id, more in (("r1", found), ("r2", {})):
        store.save_run(
            run_report(run_id, suite="s", target="t", started_at=NOW, duration_s=1.0, **more)
        )
    at = NOW.isoformat()
    assert overview.stale_findings(store, ["r1", "r2", "nope"]) == {
        "r1": ((StaleLabelEntry("c1", "d2", "missing", at),), IndexLookup(at, 2, ("d2",), at)),
        "r2": (None, None),  # a run that could not tell, stored before lookups were recorded
    }
