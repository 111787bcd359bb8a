"""The power table of `calibrate --power`: each metric's row, and why a drop needs no count."""

from __future__ import annotations

import io

from rich.console import Console

from ragcanary.cli.power import power_table
from ragcanary.measure.power import Detectable
from ragcanary.measure.verdict import Policy


def _rows(found: list[Detectable], drop: float | None) -> list[list[str]]:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(power_table(found, Policy(), drop))
    lines = console.export_text().splitlines()
    return [
        [c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")
    ]


def test_each_metric_gets_its_figures_and_the_canaries_a_drop_needs() -> None:
    found = [
        Detectable("hit_rate@5", 0.9, 0.02, 0.0612, 0.068, needed=1234),
        Detectable("mrr", 0.6, 0.01, None, None),
        Detectable("ndcg@10", 0.04, 0.01, 0.03, 0.75),
        Detectable("recall@10", 0.8, 0.01, 0.05, 0.0625),
    ]
    assert _rows(found, 0.05) == [
        ["hit_rate@5", "0.9000", "0.0200", "0.0612", "6.8%", "1,234"],
        ["mrr", "0.6000", "0.0100", "not detectable", "-", "more than 2,000"],
        ["ndcg@10", "0.0400", "0.0100", "0.0300", "75.0%", "never (above the mean)"],
        ["recall@10", "0.8000", "0.0100", "0.0500", "6.2%", "more than 2,000"],
    ]
    assert _rows(found, 0.01)[1][-1] == "never (not above max_drop)"
    assert len(_rows(found, None)[0]) == 5
