"""Failure reports: bounds, redaction, deduplication, rate limits, and the batches written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragcanary.serve.intake import (
    DEFAULT_REDACTIONS,
    MAX_IDS,
    MAX_QUERY_CHARS,
    Intake,
    IntakeSettings,
    Recount,
    Redactor,
    Refused,
    SourceLimiter,
    check,
    normalised,
    query_key,
)
from ragcanary.store.candidates import CandidateStore, FailureReport
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TARGETS = ["docs-search"]
REDACT = Redactor()


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        pytest.param([], 400, "JSON object", id="not-an-object"),
        pytest.param({"signal": "thumbs_down"}, 400, "query: a non-empty string", id="no-query"),
        pytest.param({"query": "  ", "signal": "other"}, 400, "non-empty", id="blank-query"),
        pytest.param(
            {"query": "x" * (MAX_QUERY_CHARS + 1), "signal": "other"},
            400,
            f"more than {MAX_QUERY_CHARS}",
            id="query-too-long",
        ),
        pytest.param({"query": "q", "signal": "angry"}, 400, "signal: one of", id="signal"),
        pytest.param(
            {"query": "q", "signal": "other", "target": "nope"}, 400, "not configured", id="target"
        ),
        pytest.param(
            {"query": "q", "signal": "other", "ids": ["a"] * (MAX_IDS + 1)},
            400,
            f"at most {MAX_IDS}",
            id="too-many-ids",
        ),
        pytest.param(
            {"query": "q", "signal": "other", "ids": [1]}, 400, "list of strings", id="ids"
        ),
        pytest.param(
            {"query": "q", "signal": "other", "extra": 1}, 400, "unknown field", id="extra"
        ),
    ],
)
def test_a_report_out_of_bounds_is_refused_with_its_reason(
    body: Any, status: int, says: str
) -> None:
    with pytest.raises(Refused) as refused:
        check(body, TARGETS, REDACT, NOW)
    assert refused.value.status == status
    assert says in refused.value.reason


def test_emails_and_phone_numbers_are_redacted_from_query_and_note() -> None:
    body = {
        "query": "why can't ana.b+x@example.co.uk log in? call +44 20 7946 0958",
        "signal": "thumbs_down",
        "note": "user jo@corp.io said so",
        "target": "docs-search",
        "ids": ["doc-1"],
        "source": "web",
    }
    report = check(body, TARGETS, REDACT, NOW)
    assert report.query == "why can't <email> log in? call <phone>"
    assert report.note == "user <email> said so"
    assert (report.target, report.ids, report.source) == ("docs-search", ("doc-1",), "web")
    assert "2026" in REDACT("released in 2026, version 3.11.7")  # years and versions stay


def test_configured_patterns_replace_the_defaults() -> None:
    custom = Redactor([(r"ACC-\d+", "<account>")])
    assert custom("ACC-123 for a@b.io") == "<account> for a@b.io"
    assert Redactor(DEFAULT_REDACTIONS)("a@b.io") == "<email>"


def test_one_question_asked_alike_has_one_key() -> None:
    assert normalised("  How do I RESET my password?? ") == "how do i reset my password"
    assert query_key("How do I reset my password?") == query_key("how do i  reset my password")
    assert query_key("reset password") != query_key("reset passwords")


def test_a_source_over_its_rate_waits_and_others_do_not() -> None:
    now = [0.0]
    limiter = SourceLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.take("app") for _ in range(3)] == [None, None, None]
    wait = limiter.take("app")
    assert wait == pytest.approx(0.5)
    assert limiter.take("other") is None
    now[0] = 0.5
    assert limiter.take("app") is None


def _report(query: str, signal: str = "thumbs_down", at: datetime = NOW) -> FailureReport:
    return FailureReport(query_key(query), query, signal, at)


def test_reports_of_one_query_become_one_candidate_with_counts(store: Store) -> None:
    found = CandidateStore(store)
    found.add([_report("Reset password?"), _report("reset password", "rephrased")], 100)
    found.add([_report("RESET PASSWORD"), _report("pricing", at=NOW + timedelta(minutes=1))], 100)
    rows = found.list()
    assert [(r["query"], r["reports"]) for r in rows] == [("Reset password?", 3), ("pricing", 1)]
    assert rows[0]["signals"] == {"thumbs_down": 2, "rephrased": 1}
    assert len(rows[0]["recent"]) == 3
    assert found.pending_by_signal() == {"thumbs_down": 2, "rephrased": 1}
    assert [r["query"] for r in found.list(signal="rephrased")] == ["Reset password?"]


def test_past_the_cap_the_oldest_pending_candidates_are_dropped(store: Store) -> None:
    found = CandidateStore(store)
    reports = [_report(f"question {i}", at=NOW + timedelta(seconds=i)) for i in range(5)]
    added = found.add(reports, max_pending=3)
    assert added.dropped == {"cap": 2}
    assert sorted(r["query"] for r in found.list()) == ["question 2", "question 3", "question 4"]


def test_a_reviewed_candidate_is_closed_once(store: Store) -> None:
    found = CandidateStore(store)
    found.add([_report("pricing")], 100)
    (row,) = found.list()
    assert found.close(row["id"], "dismissed", "not our product")
    assert not found.close(row["id"], "promoted", "core/pricing")
    assert found.list() == []
    assert found.list(status="dismissed")[0]["outcome"] == "not our product"


@pytest.mark.anyio
async def test_the_intake_queues_counts_and_writes_in_batches(store: Store) -> None:
    received: list[str] = []
    dropped: list[tuple[str, int]] = []
    intake = Intake(
        CandidateStore(store),
        IntakeSettings(max_pending=100, rate=1000.0, burst=1000, redactions=DEFAULT_REDACTIONS),
        on_received=received.append,
        on_dropped=lambda reason, n: dropped.append((reason, n)),
    )
    for _ in range(3):
        intake.receive({"query": "pricing", "signal": "abandoned"}, TARGETS, "10.0.0.1")
    with pytest.raises(Refused):
        intake.receive({"query": "pricing"}, TARGETS, "10.0.0.1")
    assert (intake.queued, received, dropped) == (3, ["abandoned"] * 3, [("invalid", 1)])
    added = await intake.flush()
    assert added is not None
    assert (added.new, intake.queued) == (1, 0)
    assert CandidateStore(store).list()[0]["reports"] == 3


# Each step at its time: "stored" (a batch), "count" (counted if due), "fail" (a count that
# could not read storage, if due); the times at which a count was due.
_EVENTS = [
    ("count", 0.0),
    ("stored", 0.2),
    ("count", 0.2),
    ("stored", 0.4),
    ("count", 0.4),
    ("count", 1.0),
    ("count", 1.2),
    ("count", 2.0),
    ("count", 15.0),
    ("count", 16.0),
]


@pytest.mark.parametrize(
    ("events", "due_at"),
    [
        pytest.param(_EVENTS, [0.0, 1.0, 16.0], id="burst-counted-once-a-second-then-idle"),
        pytest.param(
            [("count", 0.0), ("stored", 0.2), ("count", 0.2), ("count", 0.8), ("count", 1.0)],
            [0.0, 1.0],
            id="last-batch-of-a-burst-is-counted",
        ),
        pytest.param(
            [("fail", 0.0), ("count", 0.6), ("fail", 1.0), ("count", 2.0), ("count", 3.0)],
            [0.0, 1.0, 2.0],
            id="a-failed-count-is-retried",
        ),
        pytest.param(
            [("count", 0.0), ("count", 5.0), ("count", 14.9), ("count", 15.0), ("count", 20.0)],
            [0.0, 15.0],
            id="without-batches-now-and-then",
        ),
    ],
)
def test_the_pending_candidates_are_counted_again_soon_after_a_batch_but_not_after_each(
    events: list[tuple[str, float]], due_at: list[float]
) -> None:
    recount = Recount(after_change_s=1.0, every_s=15.0)
    counted = []
    for what, now in events:
        if what == "stored":
            recount.stored()
        elif recount.due(now):
            counted.append(now)
            recount.counted(now, ok=what == "count")
    assert counted == due_at


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
