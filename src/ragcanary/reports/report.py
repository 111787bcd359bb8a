"""The report JSON of a run (docs/report.md): rendering it and reading one back."""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragcanary.errors import UsageError
from ragcanary.measure.cases import Suite
from ragcanary.measure.evaluation import Evaluation
from ragcanary.measure.reasons import reasons
from ragcanary.measure.results import ANSWERED, OUTCOMES, Answer, CaseResult, Outcome, RunResult
from ragcanary.measure.verdict import Failure, Regression
from ragcanary.reports.indented import dumps_indented


def _num(value: float | None, digits: int | None = None) -> float | None:
    """A finite number for JSON (NaN/inf become null); rounded only where asked (timings).

    Metric values and scores are never rounded: the report must hold exactly what was
    served and exactly what trec_eval would compute.
    """
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits) if digits is not None else float(value)


def encode_vector(vector: Sequence[float]) -> str:
    """A query vector as the report keeps it: base64 of little-endian float32, like the
    ``encoding_format: base64`` of OpenAI's embeddings API.

    Embedding models compute in float32, so nothing they return is lost; the text is a
    fifth of the JSON number list's.
    """
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_vector(text: Any) -> tuple[float, ...] | None:
    """The vector ``encode_vector`` wrote, or None for anything else (a hand-edited report)."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) % 4:
        return None
    packed = array("f")
    packed.frombytes(raw)
    if sys.byteorder == "big":
        packed.byteswap()
    return tuple(packed)


def unanswered(report: Mapping[str, Any]) -> dict[str, int]:
    """How many queries of a report went unanswered, by outcome; only outcomes that occurred.

    Tolerates reports written by others (missing counts, odd values).
    """
    outcomes = (report.get("counts") or {}).get("outcomes") or {}
    return {
        outcome: count
        for outcome, count in outcomes.items()
        if outcome not in ANSWERED and isinstance(count, int) and count > 0
    }


def failure_kinds(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Unanswered queries by outcome: how many, and the first error of each kind (in suite order).

    Sixteen near-identical errors are one entry with a count, not sixteen lines.
    """
    kinds: dict[str, dict[str, Any]] = {}
    for case in report.get("cases") or ():
        outcome = case.get("outcome")
        if not case.get("error") or outcome in ANSWERED:
            continue
        entry = kinds.setdefault(str(outcome), {"count": 0, "first": case["error"], "case": None})
        if entry["case"] is None:
            entry["case"] = case.get("id")
        entry["count"] += 1
    return kinds


def config_failure(report: Mapping[str, Any]) -> str | None:
    """Why a run could not be read at all, when its config is to blame: the message of its
    ``config`` failure (the target answered, its response paths fit none of the answers)."""
    for failure in report.get("failures") or ():
        if isinstance(failure, Mapping) and failure.get("kind") == "config":
            return str(failure.get("message"))
    return None


def failures_of(entries: Iterable[Any]) -> list[Failure]:
    """The verdict's failures as a report records them (its ``failures`` entries), as the
    verdict made them.

    Tolerates reports written by others or by older versions (no ``amount``, odd values).
    """
    found = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        metric, case = entry.get("metric"), entry.get("case")
        found.append(
            Failure(
                kind=str(entry.get("kind") or "failure"),
                message=str(entry.get("message") or entry.get("kind") or ""),
                metric=str(metric) if metric is not None else None,
                case=str(case) if case is not None else None,
                amount=amount if math.isfinite(amount := _float(entry.get("amount"))) else None,
            )
        )
    return found


def regressions_of(entries: Iterable[Any]) -> list[Regression]:
    """The regressed (case, metric) pairs a report records (its ``regressions`` entries), in
    its order (worst first); a value that is not a number (null: it was not finite) is NaN."""
    return [
        Regression(
            case=str(entry.get("case")),
            metric=str(entry.get("metric")),
            baseline=_float(entry.get("baseline")),
            current=_float(entry.get("current")),
        )
        for entry in entries
        if isinstance(entry, Mapping)
    ]


def _float(value: Any) -> float:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    )


def reason_lines(report: Mapping[str, Any]) -> list[str]:
    """Why the run failed, as people read it (``measure.reasons``): floors first, one line a
    metric family, then the canaries that broke."""
    return reasons(failures_of(report.get("failures") or ()))


def to_report(evaluation: Evaluation) -> dict[str, Any]:
    """The report dict of one evaluated run (docs/report.md); the daemon adds keys of its own."""
    run, scores, verdict, drift, vectors = (
        evaluation.run,
        evaluation.scores,
        evaluation.verdict,
        evaluation.drift,
        evaluation.embedding,
    )
    baseline: dict[str, Any] | None = None
    if evaluation.baseline_run_id is not None:
        changes = verdict.changes
        baseline = {
            "run_id": evaluation.baseline_run_id,
            "deltas": {m: _num(c.delta) for m, c in changes.items()},
            "p_values": {m: _num(c.p_value) for m, c in changes.items()},
            "ci": {m: [_num(c.ci[0]), _num(c.ci[1])] for m, c in changes.items()},
            "win_tie_loss": {m: [c.wins, c.ties, c.losses] for m, c in changes.items()},
            "rank_overlap": _num(drift.rank_overlap) if drift else None,
            "score_drift": _num(drift.score_drift) if drift else None,
            "score_drifted_ratio": _num(drift.score_drifted_ratio) if drift else None,
            "score_shift": _num(drift.score_shift) if drift else None,
            "top_score_delta": _num(drift.top_score_delta) if drift else None,
            # 1 - mean cosine of the query vectors with the baseline's (vector search only).
            "embedding_drift": _num(vectors.drift) if vectors else None,
            "embedding_changed_ratio": _num(vectors.changed_ratio) if vectors else None,
            "embedding_dimensions": (
                {"baseline": vectors.dimensions[0], "current": vectors.dimensions[1]}
                if vectors and vectors.dimensions
                else None
            ),
        }
    outcomes = Counter(r.answer.outcome for r in run.results)
    kinds = Counter(r.case.kind for r in run.results)
    return {
        "suite": run.suite,
        "target": run.target,
        "run_id": run.run_id,
        "started_at": run.started_at.isoformat(),
        "duration_s": _num(run.duration_s, 3),
        "outcome": verdict.outcome,
        "coverage": _num(run.coverage),
        "metrics": {m: _num(v) for m, v in scores.metrics.items()},
        "metrics_by_tag": {
            tag: {m: _num(v) for m, v in values.items()} for tag, values in scores.by_tag.items()
        },
        "baseline": baseline,
        "failures": [
            {
                "kind": f.kind,
                "metric": f.metric,
                "case": f.case,
                "message": f.message,
                "amount": _num(f.amount),
            }
            for f in verdict.failures
        ],
        "regressions": [
            {
                "case": r.case,
                "metric": r.metric,
                "baseline": _num(r.baseline),
                "current": _num(r.current),
            }
            for r in verdict.regressions
        ],
        "counts": {
            "cases": len(run.results),
            "answered": sum(r.answer.answered for r in run.results),
            "labelled": kinds["labelled"],
            "negative": kinds["negative"],
            "label_free": kinds["label_free"],
            "outcomes": {o: outcomes[o] for o in OUTCOMES},
        },
        "cases": [_case_entry(r, evaluation) for r in run.results],
    }


def _case_entry(result: CaseResult, evaluation: Evaluation) -> dict[str, Any]:
    case, answer = result.case, result.answer
    entry: dict[str, Any] = {
        "id": case.id,
        "query": case.query,
        "kind": case.kind,
        "outcome": answer.outcome,
        "ids": list(answer.ids),
        "scores": [_num(s) for s in answer.scores],
        "latency_s": _num(answer.latency_s, 4),
        "error": answer.error,
        "metrics": {m: _num(v) for m, v in evaluation.scores.per_case.get(case.id, {}).items()},
    }
    comparison = evaluation.drift.per_case.get(case.id) if evaluation.drift else None
    if comparison is not None:
        entry["vs_baseline"] = {
            "rbo": _num(comparison.rbo),
            "jaccard": _num(comparison.jaccard),
            "entered": [e.id for e in comparison.entered],
            "left": [e.id for e in comparison.left],
            "top_score_delta": _num(comparison.top1_delta),
        }
    vectors = evaluation.embedding
    if vectors is not None and case.id in vectors.per_case:
        entry["embedding_cosine"] = _num(vectors.per_case[case.id])
    if result.vector is not None:  # last: the one long value of the entry
        entry["query_vector"] = encode_vector(result.vector)
    return entry


def dump_text(reports: Sequence[Mapping[str, Any]]) -> str:
    """One report as its JSON object (docs/report.md), several as a JSON array of them."""
    data: Any = reports[0] if len(reports) == 1 else list(reports)
    return dumps_indented(data) + "\n"


def load_reports(path: Path) -> list[dict[str, Any]]:
    """Read a report file written by ``--report`` (one object or an array of them)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such report file; pass a file written by --report") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable report JSON ({exc})") from None
    reports = data if isinstance(data, list) else [data]
    for i, report in enumerate(reports):
        where = f"{path}" if len(reports) == 1 else f"{path} [{i}]"
        if not isinstance(report, dict):
            raise UsageError(f"{where}: a report must be a JSON object")
        for key in ("suite", "target", "run_id", "cases"):
            if key not in report:
                raise UsageError(f"{where}: missing {key!r}; pass a file written by --report")
        if not isinstance(report["cases"], list):
            raise UsageError(f"{where}: 'cases' must be a list")
    return reports


def run_from_report(report: Mapping[str, Any], suite: Suite) -> RunResult:
    """The baseline run held in ``report``, with the *current* suite's cases and labels.

    Rescoring the baseline's ids with today's labels means a fixed label changes both sides
    alike, so deltas only ever show what the retriever did. Cases the report lacks are left
    out (unpaired); cases the suite no longer has are ignored. A case keeps its stored query
    vector only while its query is the one the vector was made for.
    """
    results = []
    for entry in report["cases"]:
        if not isinstance(entry, dict) or entry.get("id") not in suite.by_id:
            continue
        outcome = entry.get("outcome") or ("ok" if entry.get("error") is None else "bad_response")
        if outcome not in OUTCOMES:
            outcome = "bad_response"
        ids = tuple(str(i) for i in entry.get("ids") or ())
        raw_scores = entry.get("scores") or [None] * len(ids)
        scores = tuple(float(s) if isinstance(s, int | float) else None for s in raw_scores)
        if len(scores) != len(ids):
            scores = (None,) * len(ids)
        answer = Answer(ids, scores, float(entry.get("latency_s") or 0.0), _outcome(outcome))
        case = suite.by_id[entry["id"]]
        # A vector is the embedding of the query it was made for: an edited query has none.
        same_query = entry.get("query") == case.query
        vector = decode_vector(entry.get("query_vector")) if same_query else None
        results.append(CaseResult(case, answer, vector))
    started = report.get("started_at")
    try:
        started_at = datetime.fromisoformat(started) if isinstance(started, str) else None
    except ValueError:
        started_at = None
    return RunResult(
        suite=str(report["suite"]),
        target=str(report["target"]),
        run_id=str(report["run_id"]),
        started_at=started_at or datetime.fromtimestamp(0, UTC),
        duration_s=float(report.get("duration_s") or 0.0),
        results=tuple(results),
    )


def _outcome(value: str) -> Outcome:
    for outcome in OUTCOMES:
        if outcome == value:
            return outcome
    return "bad_response"
