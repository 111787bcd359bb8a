"""The release gate (docs/gate.md): a candidate target judged against the stable one, its
verdict and exit code, its ``--report`` JSON and what the terminal shows.

The candidate's run is judged with the stable target's run of the same pass as its baseline,
by the suite's own verdict rules (floors, significant drops, lost documents, canary checks),
so "worse" means exactly what a regression means for ``ragcanary run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragcanary.measure.report_json import marshal, marshal_diagnosis
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.indented import dumps_indented
from ragcanary.reports.report import failure_kinds, reason_lines

GateVerdict = Literal["ok", "regression", "unavailable", "config"]
# The exit codes of docs/cli.md: the same as `ragcanary run` gives these outcomes.
EXIT_CODES: Mapping[GateVerdict, int] = {"ok": 0, "regression": 1, "config": 2, "unavailable": 3}
_LABEL: Mapping[GateVerdict, tuple[str, str]] = {
    "ok": ("PASS", "bold green"),
    "regression": ("WORSE", "bold red"),
    "unavailable": ("UNAVAILABLE", "bold yellow"),
    "config": ("CONFIG ERROR", "bold red"),
}


@dataclass(frozen=True)
class GateResult:
    """Both runs of one gate: the stable target's (judged alone) and the candidate's (judged
    with the stable run as its baseline)."""

    suite: str
    stable: RunReport
    candidate: RunReport

    @property
    def verdict(self) -> GateVerdict:
        """``config`` when either target's answers did not fit its config, ``unavailable``
        when either answered too few canaries, else the candidate's own verdict."""
        runs = (self.stable, self.candidate)
        if any(run.config_failure() for run in runs):
            return "config"
        if any(run.outcome == "unavailable" for run in runs):
            return "unavailable"
        return "regression" if self.candidate.outcome == "regression" else "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def unavailable(self) -> tuple[RunReport, ...]:
        """The runs that answered too few canaries (or whose answers fit no config)."""
        return tuple(r for r in (self.stable, self.candidate) if r.outcome == "unavailable")

    def reasons(self) -> list[str]:
        """Why the candidate failed, as ``run`` says it; nothing when it did not."""
        return reason_lines(self.candidate) if self.verdict == "regression" else []

    def dropped(self) -> list[str]:
        """The metrics whose drop against the stable run failed the candidate."""
        drops = (f.metric for f in self.candidate.failures if f.kind == "drop" and f.metric)
        return list(dict.fromkeys(drops))


def marshal_gate(result: GateResult) -> dict[str, Any]:
    """The gate's ``--report`` object (docs/gate.md, "The report")."""
    candidate, comparison = result.candidate, result.candidate.baseline
    side: dict[str, Any] = _side(candidate)
    if comparison is not None:
        side["deltas"] = dict(comparison.deltas)
        side["p_values"] = dict(comparison.p_values)
        side["ci"] = {m: list(ci) for m, ci in comparison.ci.items()}
        side["win_tie_loss"] = {m: list(wtl) for m, wtl in comparison.win_tie_loss.items()}
        side["rank_overlap"] = comparison.rank_overlap
    side["dropped"] = result.dropped()
    diagnosis = candidate.diagnosis
    return {
        "suite": result.suite,
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "stable": _side(result.stable),
        "candidate": side,
        "reasons": result.reasons(),
        "diagnosis": marshal_diagnosis(diagnosis) if diagnosis is not None else None,
        "reports": {"stable": marshal(result.stable), "candidate": marshal(candidate)},
    }


def _side(report: RunReport) -> dict[str, Any]:
    return {
        "target": report.target,
        "run_id": report.run_id,
        "outcome": report.outcome,
        "coverage": report.coverage,
        "metrics": dict(report.metrics),
    }


def gate_json(result: GateResult) -> str:
    """The ``--report`` file's text."""
    return dumps_indented(marshal_gate(result)) + "\n"


def render_gate(result: GateResult) -> RenderableType:
    """What `ragcanary gate` prints: the verdict, the diagnosis of the difference, the metrics
    side by side, why the candidate failed, and what to do."""
    stable, candidate = result.stable, result.candidate
    label, style = _LABEL[result.verdict]
    parts: list[RenderableType] = [
        Text.assemble(
            (label, style),
            f"  gate · suite {result.suite} · candidate {candidate.target} "
            f"vs stable {stable.target} · exit {result.exit_code}",
        )
    ]
    for run in result.unavailable():
        parts.append(_unanswered(run))
    diagnosis = candidate.diagnosis
    if diagnosis is not None and result.verdict in ("ok", "regression"):
        weight = "dim" if diagnosis.cause == "none" else "bold"
        parts.append(Text(f"cause {diagnosis.cause}: {diagnosis.summary}", style=weight))
        for found in diagnosis.causes:
            cases = ", ".join(found.cases)
            ids = f"; ids {', '.join(found.ids)}" if found.ids else ""
            parts.append(Text(f"  {found.cause}: canaries {cases}{ids}; {found.evidence}"))
    if candidate.baseline is not None and result.verdict in ("ok", "regression"):
        parts.append(_metrics_table(result))
    parts.extend(Text(f"✗ {line}", style="red") for line in result.reasons())
    parts.append(_conclusion(result))
    return Group(*parts)


def _unanswered(run: RunReport) -> Text:
    kinds = failure_kinds(run)
    first = ""
    if kinds:
        outcome, kind = max(kinds.items(), key=lambda item: item[1]["count"])
        first = f"; {kind['count']} {outcome}, first ({kind['case']}): {kind['first']}"
    problem = run.config_failure()
    why = f": {problem}" if problem else first
    coverage = f"{run.coverage or 0.0:.0%}"
    return Text(f"{run.target} answered too few canaries (coverage {coverage}){why}", "yellow")


def _metrics_table(result: GateResult) -> Table:
    stable, candidate = result.stable.target, result.candidate.target
    table = Table(title=f"{stable} (stable) vs {candidate} (candidate)", title_justify="left")
    for col in ("metric", "stable", "candidate", "Δ", "p (worse)", "95% CI", "win/tie/loss"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    comparison = result.candidate.baseline
    assert comparison is not None
    for metric, delta in comparison.deltas.items():
        low, high = comparison.ci.get(metric, (None, None))
        wins, ties, losses = comparison.win_tie_loss.get(metric, (0, 0, 0))
        table.add_row(
            metric,
            _fmt(result.stable.metrics.get(metric)),
            _fmt(result.candidate.metrics.get(metric)),
            _fmt(delta, "+.4f"),
            _fmt(comparison.p_values.get(metric)),
            f"[{_fmt(low, '+.3f')}, {_fmt(high, '+.3f')}]",
            f"{wins}/{ties}/{losses}",
        )
    return table


def _conclusion(result: GateResult) -> Text:
    stable, candidate = result.stable.target, result.candidate.target
    verdict = result.verdict
    if verdict == "ok":
        return Text(f"{candidate} is not worse than {stable}: promote it", "green")
    if verdict == "regression":
        return Text(f"{candidate} is worse than {stable}: do not promote it", "bold red")
    if verdict == "unavailable":
        names = " and ".join(r.target for r in result.unavailable())
        return Text(f"{names} unavailable: nothing compared, nothing to promote", "yellow")
    return Text("a target's answers do not fit its config: fix the config, then gate again", "red")


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)
