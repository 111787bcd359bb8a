"""The run report's JSON form (docs/report.md): ``marshal`` writes it, ``unmarshal`` reads it.

The one place that knows the report's keys. ``marshal`` gives the JSON object, key for key in
the documented order (``null`` for a number that is not finite), and ``unmarshal`` takes it
back. A report ragcanary wrote reads back into an equal ``RunReport`` and marshals to the
same object again, so stored runs are answered byte for byte. A report written by hand or by
an older version is read, not refused: a value of the wrong type reads as missing (a number
as ``None``, a list as empty), as the readers of the old report dicts did; only the keys a
report cannot be without are checked (``missing_keys``), by whoever reads a file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, get_args

from ragcanary.measure.diagnosis import CAUSES, Cause, CauseEvidence, Checked, Diagnosis
from ragcanary.measure.fingerprint import Fingerprint, Setting
from ragcanary.measure.lost_ids import AnnRecall, LostId, Why
from ragcanary.measure.run_report import (
    ABSENT,
    Absent,
    BaselineComparison,
    CaseComparison,
    CaseEntry,
    ChangeVerdict,
    Counts,
    EndpointEntry,
    IndexLookup,
    Maintenance,
    RunClaim,
    RunReport,
    StaleLabelEntry,
)
from ragcanary.measure.verdict import Failure, Regression

REQUIRED = ("suite", "target", "run_id", "cases")  # what a report cannot be read without

JSON = dict[str, Any]


def missing_keys(data: Mapping[str, Any]) -> list[str]:
    """The keys of ``REQUIRED`` that ``data`` lacks (or, for ``cases``, holds no list in)."""
    missing = [key for key in REQUIRED if key not in data]
    if "cases" in data and not isinstance(data["cases"], list):
        missing.append("cases")
    return missing


# -- writing ------------------------------------------------------------------------------


def marshal(report: RunReport) -> JSON:
    """The JSON object of ``report``: plain dicts, lists, strings, numbers and ``None``."""
    data: JSON = {
        "suite": report.suite,
        "target": report.target,
        "run_id": report.run_id,
        "started_at": report.started_at.isoformat(),
        "duration_s": _finite(report.duration_s),
        "outcome": report.outcome,
    }
    if report.diagnosis is not None:  # left out of reports older than the diagnosis
        data["diagnosis"] = _diagnosis(report.diagnosis)
    data |= {
        "coverage": _finite(report.coverage),
        "metrics": _numbers(report.metrics),
        "metrics_by_tag": {tag: _numbers(values) for tag, values in report.metrics_by_tag.items()},
        "baseline": _baseline(report.baseline) if report.baseline is not None else None,
        "failures": [
            {
                "kind": f.kind,
                "metric": f.metric,
                "case": f.case,
                "message": f.message,
                "amount": _finite(f.amount),
            }
            for f in report.failures
        ],
        "regressions": [
            {
                "case": r.case,
                "metric": r.metric,
                "baseline": _finite(r.baseline),
                "current": _finite(r.current),
            }
            for r in report.regressions
        ],
        "counts": _write_counts(report.counts),
    }
    if report.fingerprint is not None:  # left out of reports older than fingerprints
        data["fingerprint"] = marshal_fingerprint(report.fingerprint)
    if not isinstance(report.endpoints, Absent):  # left out when the target has none
        data["endpoints"] = {name: _endpoint(entry) for name, entry in report.endpoints.items()}
    # The daemon's keys, before the cases: where a stored report has always had them.
    if report.claim is not None:
        claim = report.claim
        data["claim"] = {
            "job": claim.job,
            "tick": claim.tick,
            "replica": claim.replica,
            "claimed": claim.claimed,
        }
    if report.maintenance is not None:
        data["maintenance"] = {
            "change_id": report.maintenance.change_id,
            "kind": report.maintenance.kind,
        }
    if report.change is not None:
        data["change"] = marshal_change(report.change)
    if not isinstance(report.stale_labels, Absent):
        data["stale_labels"] = _stale_labels(report.stale_labels)
    if report.index_lookup is not None:
        lookup = report.index_lookup
        data["index_lookup"] = {
            "at": lookup.at,
            "ids": lookup.ids,
            "left": list(lookup.left),
            "left_at": lookup.left_at,
        }
    data["cases"] = [marshal_case(entry) for entry in report.cases]
    return data


def marshal_change(change: ChangeVerdict) -> JSON:
    """A change's verdict as the report's ``change`` object (the API's change shows it too)."""
    return {
        "id": change.id,
        "kind": change.kind,
        "verdict": change.verdict,
        "before_run_id": change.before_run_id,
        "diagnosis": _diagnosis(change.diagnosis),
        "reasons": list(change.reasons),
    }


def marshal_case(entry: CaseEntry) -> JSON:
    """The JSON object of one case entry."""
    data: JSON = {
        "id": entry.id,
        "query": entry.query,
        "kind": entry.kind,
        "outcome": entry.outcome,
        "ids": list(entry.ids),
        "scores": [_finite(s) for s in entry.scores],
        "latency_s": _finite(entry.latency_s),
        "error": entry.error,
        "metrics": _numbers(entry.metrics),
    }
    if entry.vs_baseline is not None:
        comparison = entry.vs_baseline
        data["vs_baseline"] = {
            "rbo": _finite(comparison.rbo),
            "jaccard": _finite(comparison.jaccard),
            "entered": list(comparison.entered),
            "left": list(comparison.left),
            "top_score_delta": _finite(comparison.top_score_delta),
        }
        if comparison.lost is not None:
            data["vs_baseline"]["lost"] = [{"id": i.id, "why": i.why} for i in comparison.lost]
    if not isinstance(entry.embedding_cosine, Absent):
        data["embedding_cosine"] = _finite(entry.embedding_cosine)
    if entry.query_vector is not None:  # last: the one long value of the entry
        data["query_vector"] = entry.query_vector
    return data


def _write_counts(counts: Counts) -> JSON:
    data: JSON = {
        "cases": counts.cases,
        "answered": counts.answered,
        "labelled": counts.labelled,
        "negative": counts.negative,
        "label_free": counts.label_free,
        "outcomes": dict(counts.outcomes),
    }
    if not isinstance(counts.short, Absent):  # left out of reports older than the count
        data["short"] = counts.short
    return data


def _baseline(baseline: BaselineComparison) -> JSON:
    dimensions = baseline.embedding_dimensions
    return {
        "run_id": baseline.run_id,
        "deltas": _numbers(baseline.deltas),
        "p_values": _numbers(baseline.p_values),
        "ci": {m: [_finite(low), _finite(high)] for m, (low, high) in baseline.ci.items()},
        "win_tie_loss": {m: list(counts) for m, counts in baseline.win_tie_loss.items()},
        "rank_overlap": _finite(baseline.rank_overlap),
        "score_drift": _finite(baseline.score_drift),
        "score_drifted_ratio": _finite(baseline.score_drifted_ratio),
        "score_shift": _finite(baseline.score_shift),
        "top_score_delta": _finite(baseline.top_score_delta),
        "embedding_drift": _finite(baseline.embedding_drift),
        "embedding_changed_ratio": _finite(baseline.embedding_changed_ratio),
        "embedding_dimensions": (
            {"baseline": dimensions[0], "current": dimensions[1]} if dimensions else None
        ),
    }


def _endpoint(entry: EndpointEntry) -> JSON:
    return {
        "url": entry.url,
        "asked": entry.asked,
        "answered": entry.answered,
        "rbo_min": _finite(entry.rbo_min),
        "rbo_mean": _finite(entry.rbo_mean),
        "diverged": list(entry.diverged),
        "unanswered": dict(entry.unanswered),
        "error": entry.error,
    }


def marshal_fingerprint(fingerprint: Fingerprint) -> JSON:
    """A fingerprint as the report's ``fingerprint`` object (a diff shows both runs').

    ``documents`` and ``index_settings`` are left out when the index did not tell them.
    """
    data: JSON = {
        "config_hash": fingerprint.config_hash,
        "suite_hash": fingerprint.suite_hash,
        "target_hash": fingerprint.target_hash,
        "embedding_model": fingerprint.embedding_model,
        "embedding_dimensions": fingerprint.embedding_dimensions,
    }
    if fingerprint.documents is not None:
        data["documents"] = fingerprint.documents
    if fingerprint.index_settings is not None:
        data["index_settings"] = dict(fingerprint.index_settings)
    return data


def marshal_diagnosis(diagnosis: Diagnosis) -> JSON:
    """A diagnosis as the report's ``diagnosis`` object (the gate's report holds one too)."""
    return _diagnosis(diagnosis)


def _diagnosis(diagnosis: Diagnosis) -> JSON:
    data: JSON = {
        "cause": diagnosis.cause,
        "summary": diagnosis.summary,
        "causes": [
            {"cause": c.cause, "cases": list(c.cases), "ids": list(c.ids), "evidence": c.evidence}
            for c in diagnosis.causes
        ],
        "checked": {
            "index_lookup": diagnosis.checked.index_lookup,
            "exact_search": diagnosis.checked.exact_search,
            "query_vectors": diagnosis.checked.query_vectors,
        },
        "lookup_s": _finite(diagnosis.lookup_s),
    }
    recall = diagnosis.ann_recall
    if not isinstance(recall, Absent):  # left out of reports written before it was measured
        data["ann_recall"] = (
            None
            if recall is None
            else {"k": recall.k, "value": _finite(recall.value), "pairs": recall.pairs}
        )
    return data


def _stale_labels(labels: Iterable[StaleLabelEntry] | None) -> list[JSON] | None:
    if labels is None:
        return None
    written = []
    for label in labels:
        entry: JSON = {"case": label.case, "id": label.id, "reason": label.reason}
        if label.looked_up_at is not None:
            entry["looked_up_at"] = label.looked_up_at
        written.append(entry)
    return written


def _numbers(values: Mapping[str, float | None]) -> JSON:
    return {name: _finite(value) for name, value in values.items()}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


# -- reading ------------------------------------------------------------------------------


def unmarshal(data: Mapping[str, Any], cases: tuple[CaseEntry, ...] | None = None) -> RunReport:
    """The report whose JSON object is ``data`` (``marshal``'s, or one written by hand);
    ``cases``: its case entries already read (``unmarshal_case``), in place of data's."""
    started = _started_at(data.get("started_at"))
    return RunReport(
        suite=_text(data.get("suite")),
        target=_text(data.get("target")),
        run_id=_text(data.get("run_id")),
        started_at=started,
        duration_s=_number(data.get("duration_s")),
        outcome=_text(data.get("outcome")),
        coverage=_number(data.get("coverage")),
        metrics=read_numbers(data.get("metrics")),
        metrics_by_tag={
            str(tag): read_numbers(values)
            for tag, values in _mapping(data.get("metrics_by_tag")).items()
        },
        baseline=_read_baseline(data.get("baseline")),
        failures=tuple(_failure(f) for f in _objects(data.get("failures"))),
        regressions=tuple(_regression(r) for r in _objects(data.get("regressions"))),
        counts=_counts(data.get("counts")),
        cases=(
            tuple(unmarshal_case(c) for c in _objects(data.get("cases")))
            if cases is None
            else cases
        ),
        claim=_claim(data.get("claim")),
        stale_labels=read_stale_labels(data["stale_labels"]) if "stale_labels" in data else ABSENT,
        index_lookup=read_index_lookup(data.get("index_lookup")),
        diagnosis=_read_diagnosis(data.get("diagnosis")),
        endpoints=_read_endpoints(data["endpoints"]) if "endpoints" in data else ABSENT,
        maintenance=_maintenance(data.get("maintenance")),
        change=unmarshal_change(data.get("change")),
        fingerprint=unmarshal_fingerprint(data.get("fingerprint")),
    )


def unmarshal_case(data: Mapping[str, Any]) -> CaseEntry:
    """One case entry from its JSON object."""
    ids = tuple(str(i) for i in _list(data.get("ids")))
    error = data.get("error")
    outcome = data.get("outcome") or ("ok" if error is None else "bad_response")
    comparison = data.get("vs_baseline")
    vector = data.get("query_vector")
    return CaseEntry(
        id=_text(data.get("id")),
        query=_text(data.get("query")),
        kind=_text(data.get("kind")),
        outcome=str(outcome),
        ids=ids,
        scores=tuple(
            s if type(s) is float and math.isfinite(s) else _number(s)
            for s in _list(data.get("scores"))
        ),
        latency_s=_number(data.get("latency_s")),
        error=None if error is None else str(error),
        metrics=read_numbers(data.get("metrics")),
        vs_baseline=(
            CaseComparison(
                rbo=_number(comparison.get("rbo")),
                jaccard=_number(comparison.get("jaccard")),
                entered=tuple(str(i) for i in _list(comparison.get("entered"))),
                left=tuple(str(i) for i in _list(comparison.get("left"))),
                top_score_delta=_number(comparison.get("top_score_delta")),
                lost=_read_lost(comparison["lost"]) if "lost" in comparison else None,
            )
            if isinstance(comparison, Mapping)
            else None
        ),
        embedding_cosine=(
            _number(data["embedding_cosine"]) if "embedding_cosine" in data else ABSENT
        ),
        query_vector=vector if isinstance(vector, str) else None,
    )


def unmarshal_fingerprint(data: Any) -> Fingerprint | None:
    """A report's ``fingerprint`` from its JSON (None: the report has none)."""
    if not isinstance(data, Mapping):
        return None
    model = data.get("embedding_model")
    settings = data.get("index_settings")
    return Fingerprint(
        config_hash=_text(data.get("config_hash")),
        suite_hash=_text(data.get("suite_hash")),
        target_hash=_text(data.get("target_hash")),
        embedding_model=None if model is None else _text(model),
        embedding_dimensions=_count(data.get("embedding_dimensions")),
        documents=_count(data.get("documents")),
        index_settings=(
            {str(k): v for k, v in settings.items() if _setting(v)}
            if isinstance(settings, Mapping)
            else None
        ),
    )


def _setting(value: Any) -> bool:
    """A value an index setting may hold: text, a number or a boolean."""
    return isinstance(value, Setting)


def _read_diagnosis(data: Any) -> Diagnosis | None:
    if not isinstance(data, Mapping):
        return None
    checked = _mapping(data.get("checked"))
    return Diagnosis(
        cause=_cause(data.get("cause")),
        summary=_text(data.get("summary")),
        causes=tuple(
            CauseEvidence(
                cause=_cause(c.get("cause")),
                cases=tuple(str(i) for i in _list(c.get("cases"))),
                ids=tuple(str(i) for i in _list(c.get("ids"))),
                evidence=_text(c.get("evidence")),
            )
            for c in _objects(data.get("causes"))
        ),
        checked=Checked(
            index_lookup=checked.get("index_lookup") is True,
            exact_search=checked.get("exact_search") is True,
            query_vectors=checked.get("query_vectors") is True,
        ),
        lookup_s=_number(data.get("lookup_s")),
        ann_recall=_read_ann_recall(data["ann_recall"]) if "ann_recall" in data else ABSENT,
    )


def _read_ann_recall(data: Any) -> AnnRecall | None:
    """``diagnosis.ann_recall``: None for null, or for a value that is not one."""
    if not isinstance(data, Mapping):
        return None
    k, value, pairs = _count(data.get("k")), _number(data.get("value")), _count(data.get("pairs"))
    if k is None or value is None or pairs is None:
        return None
    return AnnRecall(k, value, pairs)


def _read_endpoints(data: Any) -> dict[str, EndpointEntry]:
    return {
        str(name): EndpointEntry(
            url=_text(entry.get("url")),
            asked=_count(entry.get("asked")) or 0,
            answered=_count(entry.get("answered")) or 0,
            rbo_min=_number(entry.get("rbo_min")),
            rbo_mean=_number(entry.get("rbo_mean")),
            diverged=tuple(str(i) for i in _list(entry.get("diverged"))),
            unanswered={
                str(o): n
                for o, value in _mapping(entry.get("unanswered")).items()
                if (n := _count(value)) is not None
            },
            error=_optional_text(entry.get("error")),
        )
        for name, entry in _mapping(data).items()
        if isinstance(entry, Mapping)
    }


def _cause(value: Any) -> Cause:
    """A cause of the vocabulary; anything else (a newer version's) reads as ``unknown``."""
    return next((cause for cause in CAUSES if cause == value), "unknown")


def _read_lost(data: Any) -> tuple[LostId, ...]:
    whys: tuple[Why, ...] = get_args(Why)
    return tuple(
        LostId(_text(item.get("id")), next((w for w in whys if w == item.get("why")), "unknown"))
        for item in _objects(data)
    )


def _read_baseline(data: Any) -> BaselineComparison | None:
    if not isinstance(data, Mapping):
        return None
    dimensions = _mapping(data.get("embedding_dimensions"))
    before, now = _count(dimensions.get("baseline")), _count(dimensions.get("current"))
    return BaselineComparison(
        run_id=_text(data.get("run_id")),
        deltas=read_numbers(data.get("deltas")),
        p_values=read_numbers(data.get("p_values")),
        ci={
            str(m): (_number(pair[0]), _number(pair[1]))
            for m, pair in _mapping(data.get("ci")).items()
            if isinstance(pair, list) and len(pair) == 2
        },
        win_tie_loss={
            str(m): (int(counts[0]), int(counts[1]), int(counts[2]))
            for m, counts in _mapping(data.get("win_tie_loss")).items()
            if isinstance(counts, list) and len(counts) == 3 and all(map(_integer, counts))
        },
        rank_overlap=_number(data.get("rank_overlap")),
        score_drift=_number(data.get("score_drift")),
        score_drifted_ratio=_number(data.get("score_drifted_ratio")),
        score_shift=_number(data.get("score_shift")),
        top_score_delta=_number(data.get("top_score_delta")),
        embedding_drift=_number(data.get("embedding_drift")),
        embedding_changed_ratio=_number(data.get("embedding_changed_ratio")),
        embedding_dimensions=(before, now) if before is not None and now is not None else None,
    )


def _failure(data: Mapping[str, Any]) -> Failure:
    metric, case = data.get("metric"), data.get("case")
    return Failure(
        kind=str(data.get("kind") or "failure"),
        message=str(data.get("message") or data.get("kind") or ""),
        metric=str(metric) if metric is not None else None,
        case=str(case) if case is not None else None,
        amount=_number(data.get("amount")),
    )


def _regression(data: Mapping[str, Any]) -> Regression:
    """A regressed (case, metric); a value that is not a number (null) is NaN."""
    baseline, current = _number(data.get("baseline")), _number(data.get("current"))
    return Regression(
        case=str(data.get("case")),
        metric=str(data.get("metric")),
        baseline=math.nan if baseline is None else baseline,
        current=math.nan if current is None else current,
    )


def _counts(data: Any) -> Counts:
    counts = _mapping(data)
    outcomes = _mapping(counts.get("outcomes"))
    short = _count(counts.get("short"))
    return Counts(
        cases=_count(counts.get("cases")) or 0,
        answered=_count(counts.get("answered")) or 0,
        labelled=_count(counts.get("labelled")) or 0,
        negative=_count(counts.get("negative")) or 0,
        label_free=_count(counts.get("label_free")) or 0,
        outcomes={str(o): n for o, value in outcomes.items() if (n := _count(value)) is not None},
        short=ABSENT if short is None else short,  # a wrong type reads as missing
    )


def _claim(data: Any) -> RunClaim | None:
    if not isinstance(data, Mapping):
        return None
    return RunClaim(
        job=_text(data.get("job")),
        tick=_text(data.get("tick")),
        replica=_text(data.get("replica")),
        claimed=data.get("claimed") is not False,
    )


def _maintenance(data: Any) -> Maintenance | None:
    if not isinstance(data, Mapping) or not isinstance(data.get("change_id"), str):
        return None
    return Maintenance(change_id=data["change_id"], kind=_text(data.get("kind")))


def unmarshal_change(data: Any) -> ChangeVerdict | None:
    """A report's ``change`` from its JSON (None: the run carries no change's verdict)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("id"), str):
        return None
    before = data.get("before_run_id")
    return ChangeVerdict(
        id=data["id"],
        kind=_text(data.get("kind")),
        verdict=_text(data.get("verdict")),
        before_run_id=before if isinstance(before, str) else None,
        diagnosis=_read_diagnosis(data.get("diagnosis")) or Diagnosis("unknown", ""),
        reasons=tuple(str(r) for r in _list(data.get("reasons"))),
    )


def change_in(data: Any) -> ChangeVerdict | None:
    """The ``change`` of a report's JSON object (or of its stored head), if it has one."""
    return unmarshal_change(_mapping(data).get("change"))


def read_stale_labels(data: Any) -> tuple[StaleLabelEntry, ...] | None:
    """A report's ``stale_labels`` from their JSON (None: the run could not tell)."""
    if not isinstance(data, list):
        return None
    return tuple(
        StaleLabelEntry(
            case=_text(entry.get("case")),
            id=_text(entry.get("id")),
            reason=_text(entry.get("reason")),
            looked_up_at=_optional_text(entry.get("looked_up_at")),
        )
        for entry in data
        if isinstance(entry, Mapping)
    )


def read_index_lookup(data: Any) -> IndexLookup | None:
    """A report's ``index_lookup`` from its JSON (None: the report has none)."""
    if not isinstance(data, Mapping):
        return None
    return IndexLookup(
        at=_optional_text(data.get("at")),
        ids=_count(data.get("ids")) or 0,
        left=tuple(str(i) for i in _list(data.get("left"))),
        left_at=_optional_text(data.get("left_at")),
    )


def _started_at(value: Any) -> datetime:
    """When the run started; the epoch for a report that does not say (a hand-written one)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return datetime.fromtimestamp(0, UTC)


def read_numbers(data: Any) -> dict[str, float | None]:
    """A map of metric names to numbers from its JSON (a value not a finite number: None)."""
    # A whole report holds a few hundred thousand of these, and scores (unmarshal_case) tens of
    # thousands: a finite float, what nearly all are, is taken as it is without a call
    # (docs/performance.md, "Web pages").
    return {
        str(name): value if type(value) is float and math.isfinite(value) else _number(value)
        for name, value in _mapping(data).items()
    }


def _number(value: Any) -> float | None:
    """A finite number as a float, else None (null, text, a boolean, NaN)."""
    if type(value) is float:  # what nearly every number of a report is: one test, no copy
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> int | None:
    """An integer, else None."""
    return int(value) if _integer(value) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _objects(value: Any) -> Iterable[Mapping[str, Any]]:
    return (item for item in _list(value) if isinstance(item, Mapping))
