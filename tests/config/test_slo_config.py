"""suites.NAME.slo: loaded into the SLO measure counts by, every mistake a located problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcanary.errors import ConfigError, Problem
from ragcanary.measure.slo import GoodAnswer, Objective
from ragcanary.suites.loaded import load_config

CONFIG = """\
targets:
  search:
    url: http://127.0.0.1:8088/search
    body: {q: "{query}"}
suites:
  core:
    cases: core.yaml
    targets: [search]
    k: [1, 5, 10]
    slo:
      objective: 0.99
      window: 30d
      good: "hit_rate@5"
"""
SLO_LINES = {"objective": 11, "window": 12, "good": 13}


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "core.yaml").write_text(
        "cases:\n  - {id: a, query: q, relevant: [x]}\n", encoding="utf-8"
    )
    path = tmp_path / "ragcanary.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    return caught.value.problems


def test_an_slo_loads_as_the_objective_measure_counts_by(tmp_path: Path) -> None:
    loaded = load_config(_write(tmp_path, CONFIG), {})
    slo = loaded.config.suites["core"].slo
    assert slo is not None
    assert slo.objective_of() == Objective(0.99, 30 * 86400.0, GoodAnswer("hit_rate@5"))


def test_a_suite_without_slo_has_none_and_the_window_defaults_to_30_days(tmp_path: Path) -> None:
    text = CONFIG.replace("      window: 30d\n", "")
    loaded = load_config(_write(tmp_path, text), {})
    slo = loaded.config.suites["core"].slo
    assert slo is not None
    assert slo.window == 30 * 86400.0
    bare = CONFIG.split("    slo:")[0]
    assert load_config(_write(tmp_path, bare), {}).config.suites["core"].slo is None


@pytest.mark.parametrize(
    ("old", "new", "field", "message", "fix"),
    [
        ("objective: 0.99", "objective: 1.5", "objective", "1.5 is not below 1", "below 1"),
        ("objective: 0.99", "objective: 0", "objective", "0 is not above 0", "above 0"),
        ("objective: 0.99", "objective: 1", "objective", "is not below 1", "below 1"),
        ("window: 30d", "window: a month", "window", "'a month' is not a duration", "30d"),
        ("window: 30d", "window: 1d", "window", "shorter than the slow-burn", "3d or more"),
        ('good: "hit_rate@5"', 'good: "hits@5"', "good", "'hits@5' is not a metric", "hit_rate@5"),
        ('good: "hit_rate@5"', 'good: "ndcg@10 > 0.5"', "good", "use >=", "ndcg@10 >= 0.5"),
        ('good: "hit_rate@5"', 'good: "ndcg@10 >= 2"', "good", "at most 1", "ndcg@10 >= 0.5"),
        ('good: "hit_rate@5"', 'good: "ndcg@3"', "good", "3 is not in k", "add 3 to k"),
    ],
)
def test_each_slo_mistake_is_one_located_problem_with_a_fix(
    tmp_path: Path, old: str, new: str, field: str, message: str, fix: str
) -> None:
    assert old in CONFIG
    path = _write(tmp_path, CONFIG.replace(old, new))
    [problem] = _problems(path)
    assert (problem.file, problem.path, problem.line) == (
        str(path),
        f"suites.core.slo.{field}",
        SLO_LINES[field],
    )
    assert message in problem.message
    assert fix in problem.fix


def test_a_missing_good_or_objective_is_named(tmp_path: Path) -> None:
    text = CONFIG.replace('      good: "hit_rate@5"\n', "").replace("      objective: 0.99\n", "")
    found = {p.path: p for p in _problems(_write(tmp_path, text))}
    assert set(found) == {"suites.core.slo.objective", "suites.core.slo.good"}
    assert "required field is missing" in found["suites.core.slo.good"].message


def test_an_unknown_slo_field_is_named_with_the_known_ones(tmp_path: Path) -> None:
    [problem] = _problems(_write(tmp_path, CONFIG.replace("window: 30d", "windw: 30d")))
    assert problem.path == "suites.core.slo.windw"
    assert "window" in problem.fix


def test_a_window_longer_than_retention_is_located_at_the_window(tmp_path: Path) -> None:
    text = "retention: 14d\n" + CONFIG
    [problem] = _problems(_write(tmp_path, text))
    assert (problem.path, problem.line) == ("suites.core.slo.window", SLO_LINES["window"] + 1)
    assert "longer than retention (2w)" in problem.message
    assert "retention: 30d" in problem.fix
