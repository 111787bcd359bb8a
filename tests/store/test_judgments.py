"""Judgments in storage: claimed once per (document, query, fingerprint), bounded per run and
per day, graded or released, decided once; on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, insert, inspect

from ragcanary.store.judgments import JudgmentStore, Wanted, judgment_key
from ragcanary.store.migrations import current_version
from ragcanary.store.schema import judgments, schema_version
from ragcanary.store.storage import Store

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def wanted(
    *docs: str, query: str = "what is alpha", run: str = "r1", case: str = "c1"
) -> list[Wanted]:
    return [Wanted("core", "kb", case, doc, query, run) for doc in docs]


def test_a_document_is_claimed_once_per_query_and_fingerprint(store: Store) -> None:
    found = JudgmentStore(store)
    first = found.claim(wanted("a", "b", "a"), "j", "fp1", T0, limit=10)
    assert [(j.doc_id, j.state, j.run_id) for j in first] == [
        ("a", "queued", "r1"),
        ("b", "queued", "r1"),
    ]
    again = found.claim(
        wanted("a", "b", "c", run="r2"), "j", "fp1", T0 + timedelta(minutes=1), limit=10
    )
    assert [j.doc_id for j in again] == ["c"]
    other_query = found.claim(wanted("a", query="what is beta"), "j", "fp1", T0, limit=10)
    other_judge = found.claim(wanted("a"), "j", "fp2", T0, limit=10)
    assert [j.doc_id for j in other_query + other_judge] == ["a", "a"]


def test_claims_stop_at_the_run_s_limit_and_the_day_s(store: Store) -> None:
    found = JudgmentStore(store)
    assert len(found.claim(wanted("a", "b", "c"), "j", "fp", T0, limit=2)) == 2
    # The day allows 3 in all: 2 taken, 1 left, whatever the run's limit.
    assert [
        j.doc_id for j in found.claim(wanted("c", "d", "e"), "j", "fp", T0, limit=5, per_day=3)
    ] == ["c"]
    assert found.claim(wanted("d"), "j", "fp", T0, limit=5, per_day=3) == []
    next_day = T0 + timedelta(days=1)
    assert [
        j.doc_id for j in found.claim(wanted("d", "e"), "j", "fp", next_day, limit=5, per_day=3)
    ] == ["d", "e"]


def test_a_grade_proposes_a_refusal_is_final_and_a_release_frees_the_document(store: Store) -> None:
    found = JudgmentStore(store)
    a, b, c = found.claim(wanted("a", "b", "c"), "j", "fp", T0, limit=10)
    found.record(a.id, 2, 0.74, None)
    found.record(b.id, None, None, "no grade 0-3 in the answer: 'maybe'")
    found.release([c.id])
    assert [(j.doc_id, j.grade, j.state) for j in found.find(None)] == [
        ("b", None, "refused"),
        ("a", 2, "proposed"),
    ]
    assert found.pending() == 1
    # The refused one is not asked again; the released one is.
    assert [j.doc_id for j in found.claim(wanted("a", "b", "c"), "j", "fp", T0, limit=10)] == ["c"]


def test_a_queued_claim_abandoned_for_an_hour_is_claimed_again(store: Store) -> None:
    found = JudgmentStore(store)
    found.claim(wanted("a"), "j", "fp", T0, limit=10)
    assert found.claim(wanted("a"), "j", "fp", T0 + timedelta(minutes=30), limit=10) == []
    assert len(found.claim(wanted("a"), "j", "fp", T0 + timedelta(hours=2), limit=10)) == 1


def test_only_a_proposed_judgment_is_decided_and_only_once(store: Store) -> None:
    found = JudgmentStore(store)
    a, b = found.claim(wanted("a", "b"), "j", "fp", T0, limit=10)
    assert not found.decide(a.id, "accepted", T0)  # still queued
    found.record(a.id, 3, 0.9, None)
    found.record(b.id, 0, 0.1, None)
    assert found.decide(a.id, "accepted", T0 + timedelta(hours=1))
    assert not found.decide(a.id, "rejected", T0 + timedelta(hours=2))
    assert found.decide(b.id, "rejected", T0 + timedelta(hours=2))
    got = found.get(a.id)
    assert got is not None
    assert (got.state, got.decided_at) == ("accepted", T0 + timedelta(hours=1))
    assert found.pending() == 0
    assert [j.state for j in found.graded()] == ["accepted", "rejected"]
    assert [j.doc_id for j in found.find(None, case_id="c1", run_id="r1")] == ["b", "a"]
    assert found.find("accepted", suite="other") == []


def test_the_key_names_document_query_and_fingerprint() -> None:
    keys = {judgment_key("a", "q", "f"), judgment_key("a", "q ", "f"), judgment_key("a", "q", "g")}
    assert len(keys) == 3


def test_upgrading_from_version_9_adds_an_empty_judgments_table(tmp_path: Path) -> None:
    """A version-9 database (today's, less the judgments table) gains it, empty, in place."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with Store.from_url(url) as old:
        old.migrate()
        with old.writing() as conn:
            judgments.drop(conn)
            conn.execute(delete(schema_version).where(schema_version.c.version > 9))
            conn.execute(insert(schema_version).values(version=9, applied_at=T0))
    with Store.from_url(url) as new:
        new.migrate()
        with new.reading() as conn:
            assert inspect(conn).has_table("judgments")
            assert current_version(conn) == 10
        assert JudgmentStore(new).pending() == 0
