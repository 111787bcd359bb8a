"""`ragcanary candidates`: review the application's failure reports and grow the golden set."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from ragcanary.config.units import parse_duration
from ragcanary.errors import UsageError
from ragcanary.probe.cycle import open_target
from ragcanary.probe.target import make_client
from ragcanary.store.candidates import CandidateStore
from ragcanary.store.storage import Store
from ragcanary.suites.loaded import LoadedConfig
from ragcanary.suites.promote import append_case, case_id_for
from ragcanary.suites.suite import load_suite


def _candidates(loaded: LoadedConfig) -> CandidateStore:
    store = Store.from_url(loaded.config.storage)
    store.migrate()
    return CandidateStore(store)


def _one(found: CandidateStore, candidate_id: int) -> dict[str, Any]:
    row = found.get(candidate_id)
    if row is None:
        raise UsageError(f"no candidate {candidate_id}; `ragcanary candidates list` shows them")
    return row


def list_candidates(
    loaded: LoadedConfig, signal: str | None, since: str | None, status: str
) -> list[dict[str, Any]]:
    start = datetime.now(UTC) - timedelta(seconds=parse_duration(since)) if since else None
    found = _candidates(loaded)
    try:
        return found.list(status, signal, start)  # type: ignore[arg-type]
    finally:
        found.store.close()


def print_candidates(rows: Sequence[Mapping[str, Any]], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(rows, default=str))
        return
    if not rows:
        console.print("no candidates")
        return
    table = Table("id", "reports", "signals", "last reported", "query")
    for row in rows:
        signals = ", ".join(f"{s} {n}" for s, n in sorted(row["signals"].items()))
        last = row["last_at"].strftime("%Y-%m-%d %H:%M")
        table.add_row(str(row["id"]), str(row["reports"]), signals, last, row["query"])
    console.print(table)


async def show_candidate(
    loaded: LoadedConfig, candidate_id: int, target: str | None, depth: int
) -> dict[str, Any]:
    """The candidate, its reports, and what ``target`` answers for its query now."""
    found = _candidates(loaded)
    try:
        row = _one(found, candidate_id)
    finally:
        found.store.close()
    name = target or _target_of(loaded, row)
    cfg = loaded.config.targets[name]
    async with make_client(cfg) as client, AsyncExitStack() as stack:
        asked, embed = await open_target(stack, loaded, name, client)
        vector = None
        if embed is not None:
            (embedded,) = await embed([row["query"]])
            if embedded.vector is None:
                raise UsageError(f"the query could not be embedded: {embedded.error}")
            vector = embedded.vector
        answer = await asked.search(row["query"], depth, vector)
    live: dict[str, Any] = {"target": name, "outcome": answer.outcome, "error": answer.error}
    live["hits"] = [{"id": i, "score": s} for i, s in zip(answer.ids, answer.scores, strict=True)]
    return {**row, "live": live}


def _target_of(loaded: LoadedConfig, row: Mapping[str, Any]) -> str:
    """The target the application last named, or the config's only one."""
    named = [r.get("target") for r in row["recent"] if r.get("target") in loaded.config.targets]
    if named:
        return str(named[-1])
    if len(loaded.config.targets) == 1:
        return next(iter(loaded.config.targets))
    known = ", ".join(loaded.config.targets)
    raise UsageError(f"the reports name no target; pass --target (one of: {known})")


def print_shown(shown: Mapping[str, Any], console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(shown, default=str))
        return
    signals = ", ".join(f"{s} {n}" for s, n in sorted(shown["signals"].items()))
    console.print(f"candidate {shown['id']} ({shown['status']}): {shown['query']}", markup=False)
    console.print(f"  {shown['reports']} reports ({signals}), last {shown['last_at']}")
    for feedback in shown["recent"]:  # the application's failure reports, newest first
        ids = ", ".join(feedback.get("ids") or ()) or "-"
        note = f" note: {feedback['note']}" if feedback.get("note") else ""
        line = f"  {feedback['at']} {feedback['signal']} target {feedback.get('target') or '-'}"
        console.print(f"{line} retrieved: {ids}{note}", markup=False)
    live = shown["live"]
    console.print(f"now on {live['target']}: {live['outcome']}", markup=False)
    for rank, hit in enumerate(live["hits"], 1):
        score = "-" if hit["score"] is None else f"{hit['score']:.4f}"
        console.print(f"  {rank:>2}. {hit['id']}  {score}", markup=False)
    if live["error"]:
        console.print(f"  {live['error']}", markup=False)


def promote(
    loaded: LoadedConfig,
    candidate_id: int,
    suite: str,
    relevant: Sequence[str],
    grade: int,
    negative: bool,
    max_score: float | None,
    tags: Sequence[str],
) -> str:
    """Append the candidate to ``suite``'s file as a case; mark it promoted; the case id."""
    if suite not in loaded.config.suites:
        known = ", ".join(loaded.config.suites)
        raise UsageError(f"--suite {suite}: no such suite; the config has: {known}")
    if negative == bool(relevant):
        raise UsageError("pass --relevant ID[,ID] for a quality canary, or --negative alone")
    if negative and max_score is None:
        raise UsageError("a negative canary needs --max-score (its best score must stay below)")
    found = _candidates(loaded)
    try:
        row = _one(found, candidate_id)
        if row["status"] != "pending":
            raise UsageError(f"candidate {candidate_id} is {row['status']} already")
        path = (loaded.path.parent / loaded.config.suites[suite].cases).resolve()
        taken = {c.id for c in load_suite(path).cases}
        case: dict[str, Any] = {"id": case_id_for(row["query"], taken), "query": row["query"]}
        case["relevant"] = {} if negative else dict.fromkeys(relevant, grade)
        if max_score is not None:
            case["max_score"] = max_score
        if tags:
            case["tags"] = list(tags)
        append_case(path, case)
        found.close(candidate_id, "promoted", f"{suite}/{case['id']}")
    finally:
        found.store.close()
    return str(case["id"])


def dismiss(loaded: LoadedConfig, candidate_id: int, reason: str) -> None:
    found = _candidates(loaded)
    try:
        row = _one(found, candidate_id)
        if not found.close(candidate_id, "dismissed", reason):
            raise UsageError(f"candidate {candidate_id} is {row['status']} already")
    finally:
        found.store.close()
