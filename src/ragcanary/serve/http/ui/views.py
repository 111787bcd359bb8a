"""What each page shows, gathered from storage and the config: one function per page.

Each runs in a worker thread (storage calls block) and returns the template's context, or
raises ``PageError`` with what to tell the reader.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ragcanary.config.units import parse_duration_between
from ragcanary.errors import UsageError
from ragcanary.reports.diff import ForeignRun, diff_reports
from ragcanary.reports.report import failure_kinds, reason_lines
from ragcanary.serve.http.ui import casepage, diffpage, runpage, stalepage
from ragcanary.serve.http.ui import fleet as fleetpage
from ragcanary.serve.http.ui.baseline_flags import changed_baselines
from ragcanary.serve.schedule.jobs import interval_seconds
from ragcanary.store.change_records import Change
from ragcanary.store.errors import AmbiguousRun, UnknownRun

if TYPE_CHECKING:
    from ragcanary.serve.service import Service

DAY = timedelta(days=1)
WINDOWS = ("1d", "7d", "30d")
RUN_CHOICES = 50  # runs offered in the diff page's selects
PIN_CHOICES = 10  # successful runs offered per pair in the pin form
HEADS_KEPT = 2_000  # run summaries the fleet remembers (two per pair at most are shown)
# Sparkline points the fleet remembers: at most one a pixel (120) a day per pair, for a fleet
# of 1,000 pairs; about 250 bytes each.
VALUES_KEPT = 120_000


class PageError(Exception):
    """A page that cannot be shown: its status, and what to tell the reader."""

    def __init__(self, status: int, heading: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.status, self.heading, self.message, self.hint = status, heading, message, hint


def _pairs(service: Service) -> list[tuple[str, str]]:
    return [(s, t) for s, cfg in service.loaded.config.suites.items() for t in cfg.targets]


@dataclass(frozen=True)
class Memos:
    """What the fleet remembers of stored runs (they never change): each newest run's summary,
    and each sparkline run's headline values."""

    heads: fleetpage.Memo[dict[str, Any]] = field(
        default_factory=lambda: fleetpage.Memo(HEADS_KEPT)
    )
    values: fleetpage.Memo[tuple[float | None, float | None]] = field(
        default_factory=lambda: fleetpage.Memo(VALUES_KEPT)
    )


def fleet(service: Service, memos: Memos, suite: str | None, target: str | None) -> dict[str, Any]:
    """The fleet page: every configured pair (or those of ``suite`` / ``target``)."""
    now = datetime.now(UTC)
    config = service.loaded.config
    pairs = [
        (s, t)
        for s, t in _pairs(service)
        if (suite is None or s == suite) and (target is None or t == target)
    ]
    jobs = {(j["suite"], j["target"]): j for j in service.next_runs()}
    days = service.day_runs(pairs, now - DAY)
    newest = _newest_ids(service, pairs, days)
    heads = memos.heads.get(
        (run_id for ids in newest.values() for run_id in ids),
        lambda ids: {k: fleetpage.head_summary(v) for k, v in service.run_heads(ids).items()},
    )
    rows = []
    for pair in pairs:
        cfg = config.suites[pair[0]]
        hit_key = fleetpage.headline_hit_key(cfg)
        day = days[pair]
        rows.append(
            fleetpage.pair_row(
                pair[0],
                pair[1],
                cfg,
                interval_seconds(cfg, now),
                [heads[i] for i in newest.get(pair, []) if i in heads],
                [r[2] for r in day],
                _sparklines(service, memos, [day[i][0] for i in fleetpage.sample(day)], hit_key),
                jobs.get(pair),
                now,
            )
        )
    ordered = fleetpage.problems_first(rows)
    counts = [
        (status, sum(r.status == status for r in ordered))
        for status in fleetpage.STATUS_ORDER
        if any(r.status == status for r in ordered)
    ]
    return {
        "page": "fleet",
        "rows": ordered,
        "counts": counts,
        "status_text": fleetpage.STATUS_TEXT,
        "any_embedding": any(r.embedding_drift is not None for r in ordered),
        # Each SLO's error budget left and burn rate over its window (docs/slo.md).
        "budgets": {(b["suite"], b["target"]): b for b in service.slo_budgets(suite, target)},
        "filtered": suite is not None or target is not None,
        "now": now,
        **_changes(service, now),
        "baseline_changed": {p: f for p, f in changed_baselines(service).items() if p in pairs},
    }


CHANGES_SHOWN = 10  # the fleet page's newest declared changes


def _changes(service: Service, now: datetime) -> dict[str, Any]:
    """The newest declared changes with their verdict on each pair, and the open window of
    each target that has one."""
    changes = service.changes(CHANGES_SHOWN)
    held: dict[str, Change] = {}
    for change in sorted(changes, key=lambda c: c.started_at):
        if change.open_at(now):
            held.update(dict.fromkeys(change.targets, change))
    closed = [change for change in changes if not change.open_at(now)]
    verdicts = service.change_verdicts(closed) if closed else {}
    return {"changes": changes, "held": held, "change_verdicts": verdicts}


def _newest_ids(
    service: Service, pairs: list[tuple[str, str]], days: Mapping[tuple[str, str], list[Any]]
) -> dict[tuple[str, str], list[str]]:
    """Per pair, its newest run's id and, if that was an outage, its newest answered run's:
    from the day's runs, or from storage for pairs that have none answered today."""
    newest: dict[tuple[str, str], list[str]] = {}
    quiet = []
    for pair in pairs:
        day = days[pair]
        answered = [run_id for run_id, _, outcome in day if outcome != "unavailable"]
        if not answered:
            quiet.append(pair)
        elif day[-1][2] == "unavailable":
            newest[pair] = [day[-1][0], answered[-1]]
        else:
            newest[pair] = [day[-1][0]]
    last = service.newest_runs(quiet)
    outages = [p for p in quiet if p in last and last[p][2] == "unavailable"]
    before = service.newest_runs(outages, answered=True)
    for pair, (run_id, _, _) in last.items():
        newest[pair] = [run_id] + ([before[pair][0]] if pair in before else [])
    return newest


def _sparklines(
    service: Service, memos: Memos, run_ids: list[str], hit_key: str
) -> dict[str, list[float | None]]:
    """The Hit@k and MRR of each run in ``run_ids``, read from storage only once per run."""

    def read(keys: list[str]) -> dict[str, tuple[float | None, float | None]]:
        metrics = service.run_metrics([k.partition("\n")[0] for k in keys])
        return {
            f"{run_id}\n{hit_key}": (m.get(hit_key), m.get("mrr")) for run_id, m in metrics.items()
        }

    values = memos.values.get((f"{run_id}\n{hit_key}" for run_id in run_ids), read)
    points = [values.get(f"{run_id}\n{hit_key}", (None, None)) for run_id in run_ids]
    return {hit_key: [p[0] for p in points], "mrr": [p[1] for p in points]}


_COLUMNS = (
    ("severity", "State"),
    ("id", "Case"),
    ("outcome", "Query outcome"),
    ("hit", "Hit@k"),
    ("rr", "RR"),
    ("rbo", "RBO"),
    ("left", "Left / entered"),
    ("top", "Top score"),
    ("latency", "Latency ms"),
)
_DEFAULT_DIR = {"severity": "asc", "id": "asc", "outcome": "asc", "hit": "asc", "rr": "asc",
                "rbo": "asc", "left": "desc", "top": "asc", "latency": "desc"}  # fmt: skip


def run(
    service: Service,
    run_id: str,
    tag: str | None,
    outcome: str | None,
    sort: str,
    direction: str | None,
    page_no: int,
) -> dict[str, Any]:
    try:  # the id, or a unique prefix of it as `ragcanary run` prints it
        run_id = service.resolve_run(run_id)
    except AmbiguousRun as error:
        raise PageError(400, "Which run?", str(error)) from None
    except UnknownRun:
        pass  # answered below as no such run, like one pruned since its link was made
    report = service.report(run_id)
    if report is None:
        raise PageError(404, "No such run", f"No run {run_id} is stored.",
                        "It may have been pruned; pick one from the fleet page.")  # fmt: skip
    suite_name, target = report.pair
    cfg = service.loaded.config.suites.get(suite_name)
    hit_key = fleetpage.headline_hit_key(cfg) if cfg is not None else "hit_rate@5"
    lines = runpage.case_lines(report, service.loaded.suites.get(suite_name), hit_key)
    descending = (direction or _DEFAULT_DIR[sort]) == "desc"
    shown = runpage.sort_lines(runpage.filter_lines(lines, tag, outcome), sort, descending)
    pages = max(1, math.ceil(len(shown) / runpage.PAGE_ROWS))
    page_no = min(page_no, pages)
    start = (page_no - 1) * runpage.PAGE_ROWS
    started = report.started_at
    previous_id, next_id = service.neighbours(
        suite_name, target, started if started.tzinfo else started.replace(
            tzinfo=UTC), run_id
    )  # fmt: skip
    return {
        "page": "run",
        "report": report,
        "baseline_changed": changed_baselines(service, report.pair),
        "counts": report.counts,
        "baseline_id": report.baseline.run_id if report.baseline else None,
        "previous_id": previous_id,
        "next_id": next_id,
        "reasons": reason_lines(report),
        "unanswered": failure_kinds(report),
        "metrics": runpage.metric_lines(report),
        "drift": runpage.drift_lines(report),
        "tags": runpage.tag_lines(report, hit_key),
        "hit_key": hit_key,
        "lines": shown[start : start + runpage.PAGE_ROWS],
        "total": len(shown),
        "regressed": sum(c.state == "regressed" for c in shown),
        "failing": sum(c.state == "failing" for c in shown),
        "unanswered_count": sum(c.state == "unanswered" for c in shown),
        "pages": pages,
        "page_no": page_no,
        "page_rows": runpage.PAGE_ROWS,
        "tag": tag or "",
        "outcome": outcome or "",
        "all_tags": runpage.tags_present(lines),
        "all_outcomes": runpage.outcomes_present(lines),
        "states": runpage.STATES,
        "state_text": runpage.STATE_TEXT,
        "state_rank": {"regressed": 0, "failing": 1, "unanswered": 2, "changed": 3, "ok": 4},
        "sort": sort,
        "descending": descending,
        "columns": [
            (k, hit_key.replace("hit_rate", "Hit") if k == "hit" else v) for k, v in _COLUMNS
        ],
        "default_dir": _DEFAULT_DIR,
    }


def diff(
    service: Service,
    suite: str,
    target: str,
    from_run: str | None,
    to_run: str | None,
    page_no: int,
) -> dict[str, Any]:
    config = service.loaded.config.suites.get(suite)
    if config is None or target not in config.targets:
        raise PageError(
            404, "Unknown pair", f"No suite {suite} with target {target} is configured."
        )
    try:
        inputs = service.diff_inputs(suite, target, from_run, to_run)
    except ForeignRun as error:
        raise PageError(400, "Runs of another pair", str(error)) from None
    except AmbiguousRun as error:
        raise PageError(400, "Which run?", str(error)) from None
    except UsageError as error:
        raise PageError(404, "Nothing to diff", str(error)) from None
    before, after, relevant = inputs.before, inputs.after, inputs.relevant
    diff = diff_reports(before, after, config.depth, relevant, config.thresholds.score_drift)
    diff["newest_outage"] = inputs.newest_outage
    found = stalepage.labels_of(after.stale_labels, config.stale_label_runs)
    stale = stalepage.by_case(found)  # what the later run knew, as the diff's marks say
    stale_at = stalepage.looked_up(found)
    pages = max(1, math.ceil(len(diff["cases"]) / diffpage.PAGE_CASES))
    page_no = min(page_no, pages)
    start = (page_no - 1) * diffpage.PAGE_CASES
    shown = diff["cases"][start : start + diffpage.PAGE_CASES]
    choices = service.recent_runs(suite, target, RUN_CHOICES)
    baseline_id = service.baseline(suite, target)
    listed = {r["run_id"] for r in choices}
    for run in (before, after):  # runs older than the list stay selectable
        if run.run_id not in listed:
            choices.append(
                {"run_id": run.run_id, "started_at": run.started_at, "outcome": run.outcome}
            )
    return {
        "page": "diff",
        "suite": suite,
        "target": target,
        "baseline_changed": changed_baselines(service, (suite, target)),
        "depth": config.depth,
        "diff": diff,
        "cases": diffpage.case_diffs(shown, before, after, config.depth, relevant, stale),
        "why_text": diffpage.WHY_TEXT,
        "stale_runs": config.stale_label_runs,
        "stale_at": stale_at,  # case -> id that left the index -> when the index said so
        "pages": pages,
        "page_no": page_no,
        "choices": choices,
        "baseline_id": baseline_id,
        "from_is_baseline": before.run_id == baseline_id,
        "headline": [fleetpage.headline_hit_key(config), "mrr"],
        "case_headline": [fleetpage.headline_hit_key(config), "rr", f"ndcg@{max(config.k)}"],
    }


def case(
    service: Service, suite: str, case_id: str, target: str | None, since: str
) -> dict[str, Any]:
    config = service.loaded.config.suites.get(suite)
    loaded = service.loaded.suites.get(suite)
    if config is None or loaded is None or case_id not in loaded.by_id:
        raise PageError(404, "Unknown case", f"Suite {suite} has no case {case_id}.",
                        "Cases come from the suite file; a removed case has no page.")  # fmt: skip
    if target is not None and target not in config.targets:
        raise PageError(404, "Unknown target", f"Suite {suite} does not run on {target}.")
    target = target or config.targets[0]
    case = loaded.by_id[case_id]
    graded = [(doc, g) for doc, g in (case.relevant or {}).items() if g > 0]
    relevant = [doc for doc, _ in graded]
    start = datetime.now(UTC) - timedelta(seconds=parse_duration_between(since, "since"))
    rows = service.case_rows(suite, case_id, target, start)
    table = casepage.columns(rows, relevant, config.depth)
    latest = casepage.recent_answered(rows, table)
    entries = service.case_entries([p.run_id for p in latest], case_id)
    lists = []
    for point in latest:
        entry = entries.get(point.run_id) or {}
        ids = [str(i) for i in entry.get("ids") or point.ids]
        scores = list(entry.get("scores") or [])
        if len(scores) != len(ids):
            scores = [None] * len(ids)
        lists.append((point, list(zip(ids, scores, strict=True))[: config.depth]))
    stale, stale_at = stalepage.of_case(service, suite, target, case_id, config.stale_label_runs)
    missing = casepage.absent_now(table)
    events = casepage.events(rows, table)
    missing_since = next((e.at for e in events if e.left and e.doc in missing), None)
    return {
        "page": "case",
        "suite": suite,
        "case": case,
        "target": target,
        "targets": config.targets,
        "since": since,
        "windows": WINDOWS,
        "depth": config.depth,
        "relevant": graded,
        "relevant_ids": set(relevant),
        "runs": len(rows),
        "first_at": rows[0]["started_at"] if rows else None,
        "verdicts": casepage.verdict_counts(rows),
        "outcomes": casepage.outcome_counts(rows),
        "chart": casepage.chart_data(rows, table, config.depth),
        "events": events,
        "missing": missing,
        "never_in": casepage.never_in(table),  # missing, and in no top-k shown: never left it
        "missing_since": missing_since,
        "lists": lists,
        "recent": casepage.recent(rows, table),
        "stale": stale,
        "stale_at": stale_at,  # when the index said it no longer holds each that left it
    }


def baselines(
    service: Service, suite: str | None, target: str | None, run: str | None
) -> dict[str, Any]:
    config = service.loaded.config
    pairs = _pairs(service)
    pinned = {(b["suite"], b["target"]): b for b in service.baselines()}
    heads = service.run_heads([b["run_id"] for b in pinned.values()])
    newest = service.newest_runs(pairs)
    rows = []
    for s, t in pairs:
        cfg = config.suites[s]
        pin = pinned.get((s, t))
        pinned_head = heads.get(pin["run_id"]) if pin else None
        found = newest.get((s, t))
        latest = (
            dict(zip(("run_id", "started_at", "outcome"), found, strict=True)) if found else None
        )
        rows.append(
            {
                "suite": s,
                "target": t,
                "mode": cfg.baseline,
                "run_id": pin["run_id"] if pin else None,
                "set_at": pin["set_at"] if pin else None,
                "run_started": pinned_head.started_at if pinned_head else None,
                "metrics": pinned_head.metrics if pinned_head else {},
                "hit_key": fleetpage.headline_hit_key(cfg),
                "latest": latest,
                "config_changes": [c["text"] for c in (pin or {}).get("config_changes") or ()],
            }
        )
    chosen = [p for p in pairs if p == (suite, target)] or pairs
    candidates: list[dict[str, Any]] = []
    per_pair = PIN_CHOICES if len(chosen) == 1 else max(2, PIN_CHOICES // 2)
    for pair_suite, pair_target in chosen:
        candidates += service.runs(pair_suite, pair_target, per_pair, "ok")
    if run and run not in {c["run_id"] for c in candidates}:
        named = service.run_heads([run]).get(run)
        if named is not None:
            fields = ("run_id", "suite", "target", "started_at", "outcome")
            candidates.insert(0, {name: getattr(named, name) for name in fields})
    return {
        "page": "baselines",
        "pairs": rows,
        "token_set": bool(config.admin_token),
        "candidates": candidates,
        "chosen_suite": suite,
        "chosen_target": target,
        "chosen_run": run,
    }
