"""Benchmark: false alarms of an unchanged but noisy retriever, and how fast real incidents show.

.venv/bin/python bench/run.py detection                 # full: 30 days of runs, stored, documented
.venv/bin/python bench/detection.py --quick --workers 1   # standalone: a few hundred runs

The retriever is simulated in process: every canary of the demo suite keeps a fixed "true"
ranking (the demo BM25 index's answer), and every run jitters each score with gaussian noise
and re-sorts, ties broken at random, like an approximate (ANN/HNSW) index: near-ties swap,
results at the end of the list trade places with the ones just past it. Each run is judged
by the real ``evaluate()`` against the pinned baseline (the first run), with the suite's
default thresholds, and the alert conditions of ``deploy/prometheus/alerts.yml`` are applied
to the gauges the run would export. The retriever searches by vector, and each run's
diagnosis gets the evidence the probe would gather from its index (``bench/incidents.py``):
the benchmark counts how often an incident's first failing run names the layer that broke.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml
from incidents import (
    DIMENSIONS,
    MODEL,
    SWAPPED_MODEL,
    UNCHANGED,
    Incident,
    SimulatedIndex,
    embed,
)
from render import section, table

from ragcanary.config.model import SuiteConfig, Thresholds
from ragcanary.demo import retriever as demo
from ragcanary.measure.cases import Suite
from ragcanary.measure.diagnosis import Cause
from ragcanary.measure.evaluation import Evaluation, evaluate
from ragcanary.measure.lost_ids import IndexEvidence
from ragcanary.measure.results import CaseResult, RunResult
from ragcanary.measure.run_report import baseline_run, build_report
from ragcanary.probe.evidence import index_evidence
from ragcanary.suites.judge import settings_for
from ragcanary.suites.suite import load_suite

TITLE = "Detection quality: false alarms and detection delay"

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
SUITE_FILE = Path(demo.__file__).with_name("suite.yaml")
POOL = 30  # candidates per canary: results past the depth can move into the list
EVERY_S = 300  # the default schedule, which the alerts' `for:` durations assume
RUNS_30_DAYS = 30 * 24 * 3600 // EVERY_S
STARTED = datetime(2026, 1, 1, tzinfo=UTC)  # every simulated run's start
WITHIN = 3  # runs within which an injected incident must be caught
HORIZON = 5  # runs watched after an injection
DROPPED_CANARIES = 5  # canaries whose relevant documents an incident takes: Hit@5 ~5 points lower
SHIFT = 0.05  # every score lowered by this
# Index-side noise: every (query, document) score moved once by gaussian noise of this sd (as
# noisy document vectors do), each list re-sorted; it stays so in every later run.
INDEX_NOISE = 0.05
# Gaussian score jitter of the noise levels (sd of one score in one run).
NOISE = {"mild": 0.002, "typical": 0.005, "harsh": 0.01}
ACCEPTANCE = "harsh"  # the 30-day run uses the worst noise the goal names
# Other per-pair score_drift thresholds whose ScoreDrift condition is reported as well.
DRIFT_CANDIDATES = (0.03, 0.04, 0.05)
# Each injected incident, and the cause its first failing run's diagnosis should name. Only
# the scoring below reads this, never the simulation: the index answers look-ups from its
# state, as a database would.
EXPECTED: dict[str, Cause | None] = {
    "drop": "index_lost",  # the relevant documents of DROPPED_CANARIES canaries deleted
    "rename": "ids_changed",  # those documents re-ingested under upper-cased ids
    "ann": "ann_miss",  # those documents held, but the approximate search no longer reaches them
    "index": "index_changed",  # every stored score moved once by INDEX_NOISE (re-embedded)
    "model": "query_embedding",  # queries embedded by another model than the documents'
    # Every score lowered by SHIFT: drift that loses no document and mostly fails no run. A
    # run that does fail lost ids to the jitter (ann_miss) or crossed min_score with its ids'
    # scores moved (index_changed): no one cause is right, so none is expected.
    "shift": None,
}
SCENARIOS = {
    "drop": "documents deleted",
    "rename": "documents re-ingested under new ids",
    "ann": "documents missed by the approximate search",
    "index": f"documents re-embedded (score noise sd {INDEX_NOISE})",
    "model": "query embedding model swapped",
    "shift": f"every score {SHIFT} lower",
}


@dataclass(frozen=True)
class Scale:
    null_runs: int  # runs of the unchanged retriever against one baseline, at ACCEPTANCE
    sweep_baselines: int  # baselines per noise level of the sweep
    sweep_runs: int  # runs per baseline of the sweep
    trials: int  # injections per incident (each with its own baseline and noise)


FULL = Scale(null_runs=RUNS_30_DAYS, sweep_baselines=8, sweep_runs=100, trials=50)
QUICK = Scale(null_runs=300, sweep_baselines=2, sweep_runs=50, trials=20)


@dataclass(frozen=True)
class AlertRule:
    """One alert of alerts.yml as it reads the gauges of a run, and how long it must hold."""

    name: str
    threshold: float
    runs: int  # consecutive runs the condition must hold before the alert fires


class World:
    """The demo suite, its default config, and each canary's true ranking from the demo index."""

    def __init__(self, thresholds: Thresholds | None = None, stride: int = 1) -> None:
        """``stride`` keeps every stride-th canary: a smaller suite for quick tests."""
        self.suite = Suite(load_suite(SUITE_FILE).cases[::stride], SUITE_FILE)
        self.config = SuiteConfig(
            cases=str(SUITE_FILE), targets=["demo"], thresholds=thresholds or Thresholds()
        )
        index = demo.build_index()
        self.truth: dict[str, tuple[list[str], npt.NDArray[np.float64]]] = {}
        for case in self.suite.cases:
            hits = index.search(case.query, POOL)
            self.truth[case.id] = ([h.id for h in hits], np.array([h.score for h in hits]))
        # The retriever searches by vector: each query as either model embeds it.
        self.vectors = {
            (case.id, model): embed(model, case.query)
            for case in self.suite.cases
            for model in (MODEL, SWAPPED_MODEL)
        }

    def index(self, incident: Incident = UNCHANGED) -> SimulatedIndex:
        """The retriever's index once ``incident`` happened."""
        return SimulatedIndex(self.truth, incident, self.vectors)

    def run(
        self, rng: np.random.Generator, sigma: float, number: int, incident: Incident = UNCHANGED
    ) -> RunResult:
        """One run of the whole suite (``number`` names it): each canary's scores jittered,
        re-sorted and cut to the depth, with the query vector it was searched with."""
        index = self.index(incident)
        results = tuple(
            CaseResult(case, *index.search(case.id, rng, sigma, self.config.depth))
            for case in self.suite.cases
        )
        return RunResult("demo", "demo", f"run-{number}", STARTED, 1.0, results)

    def evidence(
        self, run: RunResult, baseline: RunResult, incident: Incident = UNCHANGED
    ) -> IndexEvidence:
        """What the probe's look-ups (``probe.evidence.index_evidence``) learn from the index
        about the judged relevant ids that left their canary's top-k."""
        return asyncio.run(index_evidence(self.index(incident), run, baseline, lambda: STARTED))

    def baseline(self, rng: np.random.Generator, sigma: float) -> RunResult:
        """The first run, through the report round trip the daemon's pinned baseline takes."""
        first = self.run(rng, sigma, 0)
        return baseline_run(build_report(evaluate(first, settings_for(self.config))), self.suite)

    def droppable(self) -> list[str]:
        """Canaries of weight 1 whose true top 3 holds a relevant document: Hit@5 is 1 for sure."""
        return [
            c.id
            for c in self.suite.cases
            if c.kind == "labelled"
            and c.weight == 1.0
            and any((c.relevant or {}).get(doc, 0) > 0 for doc in self.truth[c.id][0][:3])
        ]


@cache
def alert_rules(path: Path = ALERTS) -> dict[str, AlertRule]:
    """The thresholds and `for:` of the quality alerts in alerts.yml, as runs of EVERY_S."""
    # A limit is a number, or the suite's own threshold (`ragcanary:threshold{name="max_drop"}`,
    # the fleet view of `ragcanary_threshold`), which the benchmark's suite leaves at its
    # default. The rules read the fleet views (`ragcanary:<gauge>`) of the gauges.
    limit = (
        r"\s*(?:(?:on|ignoring)\s*\([^)]*\)\s*)?"
        r"(?:ragcanary[:_]threshold\{name=\"(\w+)\"\}|([0-9.]+))"
    )
    patterns = {
        "RagCanaryHitRateDrop": r"baseline_delta\{[^}]*hit_rate[^}]*\}\)*\s*>" + limit,
        "RagCanaryScoreDrift": r"ragcanary[:_]score_drifted_ratio\s*>" + limit,
        "RagCanaryRankChurn": r"ragcanary[:_]rank_overlap\s*<" + limit,
        "RagCanaryNegativeLeak": r"ragcanary[:_]negative_leaks\s*>" + limit,
    }
    rules = {}
    for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            pattern = patterns.get(rule.get("alert", ""))
            if pattern is None:
                continue
            found = re.search(pattern, rule["expr"])
            if found is None:
                raise SystemExit(
                    f"{path}: the expression of {rule['alert']} no longer matches {pattern!r}; "
                    "update alert_rules() in bench/detection.py to read it"
                )
            name, number = found.groups()
            threshold = float(number) if number else float(getattr(Thresholds(), name))
            held = _seconds(rule.get("for", "0s"))
            # Pending for `for:` then firing: the condition must be seen in this many runs.
            runs = 1 + math.ceil(held / EVERY_S)
            rules[rule["alert"]] = AlertRule(rule["alert"], threshold, runs)
    missing = sorted(set(patterns) - set(rules))
    if missing:
        raise SystemExit(f"{path} has no {', '.join(missing)}; update bench/detection.py")
    return rules


def _seconds(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return int(text[:-1]) * units[text[-1]]


def conditions(evaluation: Evaluation, rules: Mapping[str, AlertRule]) -> dict[str, bool]:
    """Which alert conditions the gauges of this run meet (before their `for:`)."""
    verdict, drift = evaluation.verdict, evaluation.drift
    assert drift is not None
    regression = verdict.outcome == "regression"
    hit_drop = -min(
        (c.delta for m, c in verdict.changes.items() if m.startswith("hit_rate@")), default=0.0
    )
    leaks = {f.case for f in verdict.failures if f.kind == "negative_leak"}
    return {
        "RagCanaryHitRateDrop": regression and hit_drop > rules["RagCanaryHitRateDrop"].threshold,
        "RagCanaryScoreDrift": (drift.score_drifted_ratio or 0.0)
        > rules["RagCanaryScoreDrift"].threshold,
        "RagCanaryRankChurn": regression
        and (drift.rank_overlap or 1.0) < rules["RagCanaryRankChurn"].threshold,
        "RagCanaryNegativeLeak": len(leaks) > rules["RagCanaryNegativeLeak"].threshold,
    }


def drifted_ratio(evaluation: Evaluation, threshold: float) -> float:
    """score_drifted_ratio as the run would export it with another per-pair threshold."""
    assert evaluation.drift is not None
    deltas = [abs(d) for c in evaluation.drift.per_case.values() for d in c.score_deltas.values()]
    return sum(d > threshold + 1e-12 for d in deltas) / len(deltas) if deltas else 0.0


@cache
def _world(score_drift: float | None) -> World:
    """One World per process and threshold (building the index takes a second)."""
    return World(None if score_drift is None else Thresholds(score_drift=score_drift))


def _observe(
    world: World, evaluation: Evaluation, rules: Mapping[str, AlertRule]
) -> dict[str, Any]:
    drift = evaluation.drift
    assert drift is not None
    return {
        "regression": evaluation.verdict.outcome == "regression",
        "cause": evaluation.diagnosis.cause if evaluation.diagnosis else None,
        "kinds": sorted({f.kind for f in evaluation.verdict.failures}),
        "conditions": [name for name, met in conditions(evaluation, rules).items() if met],
        "rank_overlap": drift.rank_overlap,
        "score_drift": drift.score_drift,
        "ratios": {str(t): drifted_ratio(evaluation, t) for t in _thresholds(world)},
    }


def _thresholds(world: World) -> list[float]:
    return sorted({world.config.thresholds.score_drift, *DRIFT_CANDIDATES})


def _unchanged(
    task: tuple[float, int, int, int, float | None],
) -> tuple[list[dict[str, Any]], float]:
    sigma, seed, first, count, score_drift = task
    return watch_unchanged(_world(score_drift), sigma, seed, first, count)


def watch_unchanged(
    world: World, sigma: float, seed: int, first: int, count: int
) -> tuple[list[dict[str, Any]], float]:
    """Runs ``first`` .. ``first + count - 1`` of an unchanged retriever against the baseline
    drawn from ``seed``: what each run's verdict and gauges say, and evaluate()'s total time."""
    rules = alert_rules()
    baseline = world.baseline(np.random.default_rng(seed), sigma)
    rng = np.random.default_rng([seed, first])
    observed, spent = [], 0.0
    for number in range(first, first + count):
        run = world.run(rng, sigma, number + 1)
        evidence = world.evidence(run, baseline)
        started = time.perf_counter()
        evaluation = evaluate(run, settings_for(world.config), baseline, evidence)
        spent += time.perf_counter() - started
        observed.append(_observe(world, evaluation, rules))
    return observed, spent


def _injected(task: tuple[str, float, int, float | None]) -> dict[str, Any]:
    kind, sigma, seed, score_drift = task
    return watch_incident(_world(score_drift), kind, sigma, seed)


def watch_incident(
    world: World,
    kind: str,
    sigma: float,
    seed: int,
    dropped: int = DROPPED_CANARIES,
    horizon: int = HORIZON,
) -> dict[str, Any]:
    """A fresh baseline, then ``horizon`` runs with the incident ``kind`` (see EXPECTED;
    ``drop``, ``rename`` and ``ann`` take the relevant documents of ``dropped`` canaries): the
    first run that showed it to the verdict, to each alert condition and to each alert, each
    run's diagnosed cause, and the MRR of the baseline and of the first run after."""
    rules = alert_rules()
    rng = np.random.default_rng(seed)
    baseline = world.baseline(rng, sigma)
    incident = inject(world, kind, rng, dropped)
    evaluations = []
    for number in range(1, horizon + 1):
        run = world.run(rng, sigma, number, incident)
        evidence = world.evidence(run, baseline, incident)
        evaluations.append(evaluate(run, settings_for(world.config), baseline, evidence))
    runs = [_observe(world, e, rules) for e in evaluations]
    mrr = evaluations[0].verdict.changes["mrr"]
    drift_rule = rules["RagCanaryScoreDrift"]
    return {
        "verdict": _first(r["regression"] for r in runs),
        "kinds": next((r["kinds"] for r in runs if r["regression"]), []),
        "causes": [r["cause"] for r in runs],
        "conditions": {a: _first(a in r["conditions"] for r in runs) for a in rules},
        "alerts": {a: next(iter(_fired(rule, runs)), None) for a, rule in rules.items()},
        "mrr": [mrr.baseline, mrr.current],
        "drift_at": {
            t: {
                "condition": _first(flags),
                "alert": next(iter(_streaks(flags, drift_rule.runs)), None),
            }
            for t in runs[0]["ratios"]
            for flags in [[r["ratios"][t] > drift_rule.threshold for r in runs]]
        },
    }


def inject(world: World, kind: str, rng: np.random.Generator, dropped: int) -> Incident:
    """The incident ``kind`` (a key of EXPECTED), drawn from ``rng``."""
    if kind in ("drop", "rename", "ann"):
        cases = rng.choice(world.droppable(), dropped, replace=False)
        by_id = world.suite.by_id
        docs = frozenset(d for c in cases for d, g in (by_id[c].relevant or {}).items() if g > 0)
        return {
            "drop": Incident(deleted=docs),
            "rename": Incident(renamed=docs),
            "ann": Incident(unreachable=docs),
        }[kind]
    if kind == "index":
        offsets = {c: rng.normal(0.0, INDEX_NOISE, len(s)) for c, (_, s) in world.truth.items()}
        return Incident(offsets=offsets)
    if kind == "model":
        foreign = {c: rng.permutation(s) for c, (_, s) in world.truth.items()}
        return Incident(model=SWAPPED_MODEL, foreign=foreign)
    if kind == "shift":
        return Incident(shift=SHIFT)
    raise ValueError(f"no incident named {kind!r}; choose from {', '.join(EXPECTED)}")


def _first(flags: Any) -> int | None:
    """1-based number of the first true flag, or None."""
    return next((n for n, flag in enumerate(flags, start=1) if flag), None)


def _streaks(flags: Sequence[bool], needed: int) -> list[int]:
    """Runs (1-based) at which an alert starts firing: its condition held ``needed`` in a row."""
    fired, streak = [], 0
    for number, flag in enumerate(flags, start=1):
        streak = streak + 1 if flag else 0
        if streak == needed:
            fired.append(number)
    return fired


def _fired(rule: AlertRule, runs: Sequence[Mapping[str, Any]]) -> list[int]:
    """Runs at which ``rule`` starts firing."""
    return _streaks([rule.name in r["conditions"] for r in runs], rule.runs)


def _parallel(function: Any, tasks: Sequence[Any], workers: int) -> list[Any]:
    if workers <= 1:
        return [function(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, tasks))


def _summary(runs: Sequence[Mapping[str, Any]], rules: Mapping[str, AlertRule]) -> dict[str, Any]:
    """False verdicts by rule, alert conditions met and alerts fired, over runs of one baseline."""
    kinds: Counter[str] = Counter(k for r in runs for k in r["kinds"])
    met: Counter[str] = Counter(c for r in runs for c in r["conditions"])
    overlaps = [r["rank_overlap"] for r in runs if r["rank_overlap"] is not None]
    return {
        "runs": len(runs),
        "false_verdicts": sum(r["regression"] for r in runs),
        "by_rule": dict(sorted(kinds.items())),
        "causes": dict(Counter(r["cause"] for r in runs)),
        "conditions": {a: met[a] for a in rules},
        "alerts": {a: len(_fired(rule, runs)) for a, rule in rules.items()},
        "min_rank_overlap": min(overlaps, default=None),
        "max_score_drift": max((r["score_drift"] or 0.0 for r in runs), default=None),
        "max_drifted_ratio": {
            t: max(r["ratios"][t] for r in runs) for t in (runs[0]["ratios"] if runs else {})
        },
    }


def _merge(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over several baselines' summaries (alert counts simply add up)."""
    total: dict[str, Any] = {"runs": 0, "false_verdicts": 0, "by_rule": Counter()}
    total["causes"], total["conditions"], total["alerts"] = Counter(), Counter(), Counter()
    for s in summaries:
        total["runs"] += s["runs"]
        total["false_verdicts"] += s["false_verdicts"]
        for key in ("by_rule", "causes", "conditions", "alerts"):
            total[key].update(s[key])
    total["min_rank_overlap"] = min(s["min_rank_overlap"] for s in summaries)
    total["max_drifted_ratio"] = {
        t: max(s["max_drifted_ratio"][t] for s in summaries)
        for t in summaries[0]["max_drifted_ratio"]
    }
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in total.items()}


def _detection(trials: Sequence[Mapping[str, Any]], pick: Any) -> dict[str, Any]:
    delays = [pick(t) for t in trials]
    caught = sorted(d for d in delays if d is not None and d <= WITHIN)
    return {
        "trials": len(trials),
        "within": len(caught),
        "rate": len(caught) / len(trials),
        "median_delay": caught[len(caught) // 2] if caught else None,
        "max_delay": max((d for d in delays if d is not None), default=None),
        "missed": sum(d is None for d in delays),
    }


def _diagnosis(trials: Sequence[Mapping[str, Any]], expected: str | None) -> dict[str, Any]:
    """Of the trials with a failing run, how many named ``expected`` at the first one (None:
    no cause is expected); the causes named there, and the causes of every run watched."""
    named = [t["causes"][t["verdict"] - 1] for t in trials if t["verdict"] is not None]
    right = None if expected is None else sum(c == expected for c in named)
    return {
        "expected": expected,
        "trials": len(trials),
        "failed": len(named),
        "named": right,
        "rate": right / len(named) if named and right is not None else None,
        "causes": dict(Counter(named)),
        "every_run": dict(Counter(c for t in trials for c in t["causes"])),
    }


def run(
    quick: bool, workers: int | None = None, score_drift: float | None = None
) -> dict[str, Any]:
    """Every figure of the benchmark (JSON-serialisable)."""
    scale = QUICK if quick else FULL
    workers = workers or min(2, os.cpu_count() or 1)
    rules = alert_rules()
    world = _world(score_drift)
    started = time.perf_counter()
    sigma = NOISE[ACCEPTANCE]
    chunk = math.ceil(scale.null_runs / workers)
    parts = _parallel(
        _unchanged,
        [
            (sigma, 1, f, min(chunk, scale.null_runs - f), score_drift)
            for f in range(0, scale.null_runs, chunk)
        ],
        workers,
    )
    observed = [o for part, _ in parts for o in part]
    per_call_ms = 1000 * sum(spent for _, spent in parts) / len(observed)
    thirty_days = _summary(observed, rules)
    thirty_days["wall_s"] = time.perf_counter() - started

    sweep = {}
    for level, noise in NOISE.items():
        tasks = [
            (noise, 100 + b, 0, scale.sweep_runs, score_drift) for b in range(scale.sweep_baselines)
        ]
        sweep[level] = _merge(
            [_summary(part, rules) for part, _ in _parallel(_unchanged, tasks, workers)]
        )
        sweep[level]["sigma"] = noise

    detection = {}
    for kind, expected in EXPECTED.items():
        injections = [(kind, sigma, 1000 + t, score_drift) for t in range(scale.trials)]
        trials = _parallel(_injected, injections, workers)
        detection[kind] = {
            "verdict": _detection(trials, lambda t: t["verdict"]),
            "diagnosis": _diagnosis(trials, expected),
            "kinds": dict(Counter(k for t in trials for k in t["kinds"])),
            "mrr_drop": sorted(t["mrr"][0] - t["mrr"][1] for t in trials),
            "conditions": {a: _detection(trials, lambda t, a=a: t["conditions"][a]) for a in rules},
            "alerts": {a: _detection(trials, lambda t, a=a: t["alerts"][a]) for a in rules},
            "score_drift_thresholds": {
                th: {
                    key: _detection(trials, lambda t, th=th, key=key: t["drift_at"][th][key])
                    for key in ("condition", "alert")
                }
                for th in trials[0]["drift_at"]
            },
        }
    return {
        "quick": quick,
        "workers": workers,
        "noise": ACCEPTANCE,
        "sigma": sigma,
        "cases": len(world.suite.cases),
        "thresholds": world.config.thresholds.model_dump(),
        "min_coverage": world.config.min_coverage,
        "rules": {a: {"threshold": r.threshold, "runs": r.runs} for a, r in rules.items()},
        "evaluate_ms": per_call_ms,
        "thirty_days": thirty_days,
        "sweep": sweep,
        "detection": detection,
        "wall_s": time.perf_counter() - started,
    }


def _caught(d: Mapping[str, Any]) -> list[str]:
    median = "-" if d["median_delay"] is None else str(d["median_delay"])
    return [f"{d['within']}/{d['trials']} ({d['rate']:.0%})", median, str(d["missed"])]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "0/0"


def _listed(counts: Mapping[str, int]) -> str:
    shown = [f"{k.removeprefix('RagCanary')} {v}" for k, v in counts.items() if v]
    return ", ".join(shown) or "none"


def render(result: dict[str, Any]) -> str:
    """The section body of docs/performance.md: What, How, the tables, What it means."""
    t, days, found = result["thresholds"], result["thirty_days"], result["detection"]
    drop, shift, index = found["drop"], found["shift"], found["index"]
    drift_condition = shift["conditions"]["RagCanaryScoreDrift"]
    setup = (
        f"The demo suite ({result['cases']} canaries) keeps each canary's ranking from the demo "
        "BM25 index; every run adds gaussian noise to every score and re-sorts (ties at "
        "random), so near-ties swap and results at the end of the list trade places with the "
        "next ones. The real `evaluate()` judges each run against the pinned baseline (the "
        "first run, stored and read back as a report) with the suite defaults (max_drop "
        f"{t['max_drop']}, significance {t['significance']}, min_rank_overlap "
        f"{t['min_rank_overlap']}, score_drift {t['score_drift']}, min_coverage "
        f"{result['min_coverage']}). Alert conditions come from "
        "`deploy/prometheus/alerts.yml`; an alert fires once its condition held through its "
        f"`for:` ({_listed({a: r['runs'] for a, r in result['rules'].items()})} runs in a row "
        f"at 5m). Injections (each stays so in later runs): the relevant documents of "
        f"{DROPPED_CANARIES} canaries are deleted, re-ingested under upper-cased ids, or still "
        "held but no longer reached by the approximate search; every score drops by "
        f"{SHIFT}; index-side noise moves every (query, document) score once by gaussian "
        f"noise of sd {INDEX_NOISE} and the lists are re-sorted (documents re-embedded); or "
        "the queries are embedded by another model than the documents' (each pool's scores "
        "in a random order). Each trial has its own baseline and noise and is watched for "
        f"{HORIZON} runs. The retriever searches by vector ({DIMENSIONS}-dimensional "
        "stand-in query vectors, one set per model), and each run's diagnosis gets the "
        "evidence the probe gathers (`probe.evidence.index_evidence`) from the simulated "
        "index: which of the judged relevant ids that left the top-k it no longer holds, and "
        "the exact score of the held ones for the run's query vector, computed without the "
        f"jitter and reaching every document. evaluate() took {result['evaluate_ms']:.0f} ms "
        f"a run; the benchmark {result['wall_s']:.0f} s on {result['workers']} processes."
    )
    rows = [(f"{result['sigma']} ({result['noise']}), one baseline, 30 days", days)]
    rows += [
        (f"{v['sigma']} ({name}), several baselines", v) for name, v in result["sweep"].items()
    ]
    unchanged = table(
        [
            "unchanged retriever (score noise sd)",
            "runs",
            "false verdicts (by rule)",
            "alert conditions met",
            "alerts fired",
            "lowest rank overlap",
            "diagnosis: cause none",
        ],
        [
            [
                label,
                str(v["runs"]),
                f"{v['false_verdicts']} ({_listed(v['by_rule'])})",
                _listed(v["conditions"]),
                _listed(v["alerts"]),
                f"{v['min_rank_overlap']:.3f}",
                _share(v["causes"].get("none", 0), v["runs"]),
            ]
            for label, v in rows
        ],
    )
    caught = [
        ["Hit@5 drop: regression verdict", *_caught(drop["verdict"])],
        [
            "Hit@5 drop: RagCanaryHitRateDrop fires",
            *_caught(drop["alerts"]["RagCanaryHitRateDrop"]),
        ],
    ]
    drops = index["mrr_drop"]
    caught.append(
        [
            f"index noise sd {INDEX_NOISE} (MRR {drops[0]:+.3f} .. {drops[-1]:+.3f} lower, "
            f"median {drops[len(drops) // 2]:.3f}): regression verdict",
            *_caught(index["verdict"]),
        ]
    )
    for threshold, d in shift["score_drift_thresholds"].items():
        caught.append(
            [
                f"score shift: ScoreDrift condition, score_drift {threshold}",
                *_caught(d["condition"]),
            ]
        )
        caught.append(
            [
                f"score shift: RagCanaryScoreDrift fires, score_drift {threshold}",
                *_caught(d["alert"]),
            ]
        )
    injected = table(
        [
            f"injected at score noise sd {result['sigma']}, detected by",
            f"within {WITHIN} runs",
            "median run",
            f"not in {HORIZON} runs",
        ],
        caught,
    )
    diagnosed = table(
        [
            f"injected at score noise sd {result['sigma']}",
            "expected cause",
            f"failing run within {HORIZON} runs",
            "diagnosis",
            "causes named at the first failing run",
        ],
        [
            [
                SCENARIOS[kind],
                f"`{d['expected']}`" if d["expected"] else "-",
                _share(d["failed"], d["trials"]),
                "-" if d["rate"] is None else _share(d["named"], d["failed"]),
                ", ".join(f"{c} {n}" for c, n in d["causes"].items()) or "none failed",
            ]
            for kind, v in found.items()
            for d in [v["diagnosis"]]
        ],
    )
    met = {
        "False alarms": days["false_verdicts"] <= 1,
        "Hit@5 drop": drop["verdict"]["rate"] == 1.0,
        "Score shift": drift_condition["rate"] == 1.0,
        "Index noise": index["verdict"]["rate"] == 1.0,
    }
    ratios = ", ".join(f"{v:.3f} at score_drift {k}" for k, v in days["max_drifted_ratio"].items())
    ratio_rule = result["rules"]["RagCanaryScoreDrift"]["threshold"]
    # Per-pair thresholds that catch every shift while the noise stays far under the alert's.
    good = [
        th
        for th, d in shift["score_drift_thresholds"].items()
        if d["condition"]["rate"] == 1.0
        and d["alert"]["rate"] == 1.0
        and days["max_drifted_ratio"][th] < ratio_rule / 2
    ]
    advice = (
        f" With score_drift {min(good, key=float)} the shift is caught and alerted every time."
        if good and not met["Score shift"]
        else ""
    )
    meaning = (
        " ".join(f"{goal}: goal {'met' if ok else '**missed**'}." for goal, ok in met.items())
        + f" {days['false_verdicts']} false verdicts in {days['runs']} runs; the unchanged "
        f"retriever's highest score_drifted_ratio was {ratios}, against the alert's "
        f"{ratio_rule}.{advice} {_diagnosed_line(days, found)} " + NOTES
    )
    what = (
        "An unchanged retriever whose scores jitter like an approximate index's must not page "
        "anyone: at most one false regression verdict in 30 days of runs every 5 minutes. A "
        f"{DROPPED_CANARIES}-canary Hit@5 drop, a {SHIFT} score shift and index-side noise of "
        f"sd {INDEX_NOISE} must each be caught within {WITHIN} runs. The first run that fails "
        "should name, in its diagnosis, the layer that broke; an unchanged run, cause `none`."
    )
    body = f"{setup}\n\n{unchanged}\n\n{injected}\n\n{diagnosed}"
    return section(what, "detection", body, meaning, quick=result["quick"])


def _diagnosed_line(days: Mapping[str, Any], found: Mapping[str, Any]) -> str:
    """One sentence: how often each incident's first failing run named its expected cause."""
    named = [
        f"{SCENARIOS[kind]} {d['named']}/{d['failed']}"
        for kind, v in found.items()
        for d in [v["diagnosis"]]
        if d["failed"] and d["expected"]
    ]
    none = days["causes"].get("none", 0)
    return (
        f"Diagnosis: the first failing run named the expected cause for {'; '.join(named)}; "
        f"the unchanged retriever's runs had cause none in {none} of {days['runs']}."
    )


# What the figures above cannot say by themselves; keep in step with the code they explain.
NOTES = (
    "Metrics and deltas are always those of the lists as returned. The verdict alone tolerates "
    "noise: while the scores did not drift (their spread against the baseline stays within "
    "score_drift), a drop must also hold once the near-tie reorderings that this spread "
    "explains are undone (`drift.align_run`: near-ties within 3 sd of the run's score deltas, "
    "at most twice score_drift). Judged as returned only, the same noise gave a false "
    "regression verdict in 1-8% of runs even at sd 0.002: Hit@1, NDCG@1 and MRR flip when "
    "near-tied results swap, and a paired test against one noisy baseline run reads a lucky "
    "baseline as a drop in every later run. Index-side noise moves the scores themselves, "
    "beyond score_drift, so no reordering is excused and its drop is judged as returned. A "
    "drop on fewer than 5 canaries can never be significant at 0.05: the sign-flip test's "
    "smallest p-value is 1/2^n. A deleted judged document fails its run on the index's word "
    "alone (`lost_document`), whatever the test says; re-ingested and unreachable documents "
    "are caught by the drop they cause. A score shift loses no document and fails runs only "
    "at times: they lost ids to the jitter once drifted scores excuse no reordering "
    "(`ann_miss`: their exact score ranks them inside the top-k) or crossed min_score, so no "
    "one cause is expected of it. A run that passes has cause `none` unless it crossed a "
    "drift threshold: a shifted run whose scores moved beyond score_drift on over half its "
    "(query, document) pairs, its query vectors unmoved, names `index_changed` even when it "
    "passes (the line RagCanaryScoreDrift fires on)."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few hundred runs")
    parser.add_argument("--workers", type=int, help="processes (default: up to 2)")
    parser.add_argument("--score-drift", type=float, help="another score_drift threshold")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    result = run(args.quick, args.workers, args.score_drift)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    sys.stdout.write(render(result))


if __name__ == "__main__":
    main()
