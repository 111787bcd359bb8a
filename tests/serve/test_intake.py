"""Failure reports: bounds, redaction, deduplication, rate limits, and the batches written."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragcanary.serve.intake.queue import (
    DEFAULT_REDACTIONS,
    MAX_IDS,
    MAX_QUERY_CHARS,
    MAX_QUEUED_BYTES,
    Intake,
    IntakeSettings,
    Recount,
    Redactor,
    SourceLimiter,
    check,
    footprint,
    normalised,
    query_key,
)
from ragcanary.serve.service import Refused
from ragcanary.store.candidates import Added, CandidateStore, FailureReport
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
        await intake.receive(b'{"query": "pricing", "signal": "abandoned"}', TARGETS, "10.0.0.1")
    with pytest.raises(Refused):
        await intake.receive(b'{"query": "pricing"}', TARGETS, "10.0.0.1")
    assert (intake.queued, received, dropped) == (3, ["abandoned"] * 3, [("invalid", 1)])
    added = await intake.flush()
    assert added is not None
    assert (added.new, intake.queued) == (1, 0)
    assert CandidateStore(store).list()[0]["reports"] == 3


@pytest.mark.parametrize(
    ("field", "value", "named", "says"),
    [
        pytest.param(
            "query", "a\x00b", "query", "NUL character (U+0000) at character 2", id="q-nul"
        ),
        pytest.param("note", "\x00", "note", "NUL", id="note-nul"),
        pytest.param("ids", ["a", "b\x00"], "ids[1]", "NUL", id="id-nul"),
        pytest.param("source", "web\x00", "source", "NUL", id="source-nul"),
        pytest.param("target", "docs\x00", "target", "NUL", id="target-nul"),
        pytest.param("query", "smile \ud83d", "query", "(U+D83D) at character 7", id="q-half"),
        pytest.param("note", "\ude00 cut", "note", "surrogate pair (U+DE00)", id="note-half"),
        pytest.param("ids", ["\udbff"], "ids[0]", "surrogate", id="id-half"),
        pytest.param("source", "app \ud800", "source", "surrogate", id="source-half"),
    ],
)
def test_text_no_database_can_store_is_refused_naming_its_field(
    field: str, value: Any, named: str, says: str
) -> None:
    body = {"query": "pricing", "signal": "other", field: value}
    with pytest.raises(Refused) as refused:
        check(body, TARGETS, REDACT, NOW)
    assert (refused.value.status, refused.value.counted_as) == (400, "invalid")
    assert refused.value.reason.startswith(f"{named}: ")
    assert says in refused.value.reason


def test_a_whole_emoji_is_taken_as_sent() -> None:
    body = {"query": "smile 😀", "signal": "other", "note": "😀", "ids": ["😀"], "source": "😀"}
    report = check(body, TARGETS, REDACT, NOW)
    assert (report.query, report.note, report.ids, report.source) == (
        "smile 😀",
        "😀",
        ("😀",),
        "😀",
    )


def test_personal_data_is_redacted_from_the_source_too_and_never_from_ids() -> None:
    body = {
        "query": "q",
        "signal": "other",
        "source": "chat of jo @ example.com",
        "ids": ["jo@example.com", "555-867-5309"],  # what the retriever returned: kept exact
    }
    report = check(body, TARGETS, REDACT, NOW)
    assert report.source == "chat of <email>"
    assert report.ids == ("jo@example.com", "555-867-5309")


def _intake(store: Store, **settings: Any) -> tuple[Intake, list[tuple[str, int]]]:
    dropped: list[tuple[str, int]] = []
    chosen = {"max_pending": 100_000, "rate": 1000.0, "burst": 1000, **settings}
    intake = Intake(
        CandidateStore(store),
        IntakeSettings(redactions=DEFAULT_REDACTIONS, **chosen),
        on_dropped=lambda reason, n: dropped.append((reason, n)),
    )
    return intake, dropped


@pytest.mark.anyio
async def test_a_client_over_its_limit_is_refused_before_its_body_is_read(store: Store) -> None:
    """The limit counts the client address, whatever ``source`` the body names, and costs
    nothing: a body past the limit is not even parsed (a malformed one is a 429, not a 400)."""
    intake, dropped = _intake(store, rate=0.001, burst=2)
    for n in range(2):
        body = json.dumps({"query": "q", "signal": "other", "source": f"app-{n}"}).encode()
        await intake.receive(body, TARGETS, "10.0.0.1")
    with pytest.raises(Refused) as refused:
        await intake.receive(b"{not json", TARGETS, "10.0.0.1")
    assert (refused.value.status, refused.value.counted_as) == (429, "rate_limited")
    assert "too many reports from 10.0.0.1" in refused.value.reason
    with pytest.raises(Refused) as other:
        await intake.receive(b"{not json", TARGETS, "10.0.0.2")
    assert (other.value.status, other.value.counted_as) == (400, "invalid")
    assert dropped == [("rate_limited", 1), ("invalid", 1)]


def _largest(n: int, character: str = "d") -> bytes:
    """The largest report there is: every field at its bound."""
    body = {
        "query": f"question {n:05d} " + "q" * 1980,
        "signal": "other",
        "ids": [f"{n:05d}-{j:03d}-" + character * 500 for j in range(MAX_IDS)],
        "note": "n" * 1000,
        "source": "s" * 200,
    }
    return json.dumps(body, ensure_ascii=False).encode()


def test_a_report_s_footprint_is_the_memory_it_holds() -> None:
    """The queue's bound in bytes is only as true as this: measured with tracemalloc, ASCII
    and emoji alike (a str of emoji takes four bytes a character)."""
    for character in ("d", "😀"):
        bodies = [_largest(n, character) for n in range(50)]
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            reports = [check(json.loads(b), TARGETS, REDACT, NOW) for b in bodies]
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        estimated = sum(footprint(r) for r in reports)
        assert held * 0.95 <= estimated <= held * 1.1, (character, held, estimated)


@pytest.mark.anyio
async def test_reports_waiting_for_storage_are_bounded_in_bytes(tmp_path: Path) -> None:
    """Storage down: the largest reports are taken until they hold MAX_QUEUED_BYTES, then
    refused (503, counted as queue_full); a failed batch keeps them all, and drops none."""
    with Store.from_url(f"sqlite:///{tmp_path / 'gone' / 'ragcanary.db'}") as down:
        intake, dropped = _intake(down)
        taken, refused = 0, None
        while refused is None and taken < 10_000:
            try:
                await intake.receive(_largest(taken), TARGETS, "10.0.0.1")
            except Refused as exc:
                refused = exc
            else:
                taken += 1
        assert refused is not None, f"{taken} reports taken"
        assert (refused.status, refused.counted_as) == (503, "queue_full")
        size = intake.queued_bytes / taken
        assert MAX_QUEUED_BYTES - size < intake.queued_bytes <= MAX_QUEUED_BYTES
        assert 900 < taken < 1200  # ~64 KiB each
        assert await intake.flush() is None
        assert (intake.queued, intake.queued_bytes / taken) == (taken, size)
        assert dropped == [("queue_full", 1)]


class _CutOffAfter(CandidateStore):
    """Storage that fails after the first ``stored`` reports of a batch are written."""

    def __init__(self, store: Store, stored: int) -> None:
        super().__init__(store)
        self.stored = stored

    def add(self, reports: Sequence[FailureReport], max_pending: int) -> Added:
        added = super().add(reports[: self.stored], max_pending)
        added.unstored = list(reports[self.stored :])
        return added


@pytest.mark.anyio
async def test_reports_left_when_storage_fails_partway_wait_for_the_next_batch(
    store: Store,
) -> None:
    intake, dropped = _intake(store)
    intake.store = _CutOffAfter(store, 2)
    for n in range(5):
        await intake.receive(json.dumps({"query": f"q{n}", "signal": "other"}).encode(), [], "a")
    full = intake.queued_bytes
    added = await intake.flush()
    assert added is not None
    assert intake.queued == 3
    assert 0 < intake.queued_bytes < full
    intake.store = CandidateStore(store)
    await intake.flush()
    assert (intake.queued, intake.queued_bytes, dropped) == (0, 0, [])
    assert sorted(r["query"] for r in CandidateStore(store).list()) == [f"q{n}" for n in range(5)]


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
