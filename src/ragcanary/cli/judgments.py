"""`ragcanary judgments`: review a judge's grades of documents nobody labelled.

Locally (the config's storage; an accept writes the suite file here) or through a daemon's
API with ``--url`` (an accept writes the daemon's suite file, and it reloads).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from ragcanary.cli import remote
from ragcanary.measure.agreement import Agreement
from ragcanary.serve.grading import review
from ragcanary.store.judgments import JudgmentStore
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig

Row = dict[str, Any]


def _judgments(loaded: LoadedConfig) -> JudgmentStore:
    store = Store.from_url(loaded.config.storage)
    store.migrate()
    return JudgmentStore(store)


def list_judgments(
    loaded: LoadedConfig | None,
    url: str | None,
    state: str,
    suite: str | None,
    run_id: str | None,
) -> list[Row]:
    """Judgments of ``state`` (``all``: every state), newest first."""
    if url is not None:
        body = remote.fetch(url, "/api/v1/judgments", state=state, suite=suite, run_id=run_id)
        return list(body["judgments"])
    assert loaded is not None
    found = _judgments(loaded)
    try:
        shown = None if state == "all" else state
        return [j.as_dict() for j in found.find(shown, suite=suite, run_id=run_id)]
    finally:
        found.store.close()


def show_judgment(loaded: LoadedConfig | None, url: str | None, judgment_id: int) -> Row:
    if url is not None:
        return dict(remote.fetch(url, f"/api/v1/judgments/{judgment_id}"))
    assert loaded is not None
    found = _judgments(loaded)
    try:
        return review.find(found, judgment_id).as_dict()
    finally:
        found.store.close()


def decide(loaded: LoadedConfig | None, url: str | None, judgment_id: int, accept: bool) -> Row:
    """Accept or reject a proposed judgment, here or on the daemon at ``url``."""
    if url is not None:
        decision = "accept" if accept else "reject"
        return dict(remote.send(url, f"/api/v1/judgments/{judgment_id}/{decision}", None))
    assert loaded is not None
    found = _judgments(loaded)
    try:
        return review.decide(loaded, found, judgment_id, accept, datetime.now(UTC)).as_dict()
    finally:
        found.store.close()


def agreement(loaded: LoadedConfig, judge: str | None) -> Agreement:
    found = _judgments(loaded)
    try:
        return review.agreement(loaded, found, judge)
    finally:
        found.store.close()


def print_judgments(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(list(rows)))
        return
    if not rows:
        console.print("no judgments")
        return
    table = Table("id", "state", "grade", "suite", "case", "document", "judge", "run")
    for row in rows:
        grade = "-" if row["grade"] is None else str(row["grade"])
        table.add_row(
            str(row["id"]),
            row["state"],
            grade,
            row["suite"],
            row["case"],
            row["doc_id"],
            row["judge"],
            row["run_id"][:12],
        )
    console.print(table)


def print_judgment(row: Mapping[str, Any], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(dict(row)))
        return
    grade = "no grade" if row["grade"] is None else f"grade {row['grade']}"
    score = "" if row["score"] is None else f" (score {row['score']:.4f})"
    console.print(f"judgment {row['id']} ({row['state']}): {grade}{score}", markup=False)
    console.print(f"  document {row['doc_id']} for case {row['suite']}/{row['case']}", markup=False)
    console.print(f"  query: {row['query']}", markup=False)
    console.print(
        f"  judge {row['judge']} ({row['fingerprint']}), run {row['run_id']}", markup=False
    )
    if row["note"]:
        console.print(f"  {row['note']}", markup=False)


def print_agreement(found: Agreement, console: Console, as_json: bool) -> None:
    both, judge_only, person_only, neither = found.table
    if as_json:
        shown = {
            "kappa": found.kappa,
            "pairs": found.pairs,
            "agreed": found.agreed,
            "observed": found.observed,
            "table": {
                "both_relevant": both,
                "judge_only": judge_only,
                "person_only": person_only,
                "neither": neither,
            },
        }
        console.print_json(json.dumps(shown))
        return
    if not found.pairs:
        console.print("no decided judgments yet: accept or reject some first")
        return
    kappa = "undefined (every pair in one class)" if found.kappa is None else f"{found.kappa:.3f}"
    console.print(f"Cohen's kappa (unweighted, relevant = grade >= 1): {kappa}")
    console.print(f"  {found.pairs} pairs, {found.agreed} agreed ({found.observed:.1%})")
    console.print(
        f"  judge and people relevant {both}, judge only {judge_only}, "
        f"people only {person_only}, neither {neither}"
    )
