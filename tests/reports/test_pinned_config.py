"""A pinned baseline measured under another config than the one in force is flagged, with
what changed; one older than fingerprints, or of a pair no longer configured, is not guessed."""

from __future__ import annotations

import io
from pathlib import Path

from factories import run_report
from rich.console import Console

from ragcanary.cli.stored import print_baselines
from ragcanary.measure.report_json import marshal_fingerprint
from ragcanary.reports.pinned_config import changed_pairs, flag_baselines
from ragcanary.suites.fingerprint import fingerprint
from ragcanary.suites.loaded import LoadedConfig, load_config

CONFIG = """\
embeddings:
  toy: {{url: "http://127.0.0.1:9/v1/embeddings", model: {model}}}
targets:
  search: {{url: "http://127.0.0.1:9/search", body: {{q: "{{query}}"}}, embedding: toy}}
suites:
  core: {{cases: core.yaml, targets: [search]}}
"""


def load(directory: Path, model: str) -> LoadedConfig:
    directory.mkdir(parents=True)
    (directory / "core.yaml").write_text("cases:\n  - {id: c1, query: q, relevant: [d]}\n")
    (directory / "ragcanary.yaml").write_text(CONFIG.format(model=model))
    return load_config(directory / "ragcanary.yaml", {})


def rows(*run_ids: str, target: str = "search") -> list[dict[str, object]]:
    return [
        {"suite": "core", "target": target, "run_id": r, "set_at": "2026-11-28"} for r in run_ids
    ]


def test_a_baseline_of_another_embedding_model_is_flagged_with_the_change(tmp_path: Path) -> None:
    then, now = load(tmp_path / "then", "toy-1"), load(tmp_path / "now", "toy-2")
    pinned = run_report("r1", fingerprint=marshal_fingerprint(fingerprint(then, "core", "search")))
    flagged = flag_baselines(now, rows("r1"), {"r1": pinned})
    texts = [c["text"] for c in flagged[0]["config_changes"]]
    assert texts[0] == "embedding model toy-1 → toy-2"
    assert changed_pairs(flagged) == {("core", "search"): texts}
    console = Console(width=300, record=True, file=io.StringIO())
    print_baselines(flagged, console, as_json=False)
    assert "CHANGED: embedding model toy-1 → toy-2" in console.export_text()


def test_a_baseline_of_the_config_in_force_is_unchanged(tmp_path: Path) -> None:
    now = load(tmp_path / "now", "toy-1")
    measured = fingerprint(now, "core", "search", dimensions=8)  # a run also knows its vectors
    pinned = run_report("r1", fingerprint=marshal_fingerprint(measured))
    flagged = flag_baselines(now, rows("r1"), {"r1": pinned})
    assert flagged[0]["config_changes"] == []
    assert changed_pairs(flagged) == {}


def test_what_cannot_be_told_is_not_guessed(tmp_path: Path) -> None:
    now = load(tmp_path / "now", "toy-2")
    old = run_report("r1")  # stored before fingerprints
    gone = run_report("r2", target="retired", fingerprint=marshal_fingerprint(
        fingerprint(now, "core", "search")))  # fmt: skip
    flagged = flag_baselines(
        now, [*rows("r1"), *rows("r2", target="retired"), *rows("r3")], {"r1": old, "r2": gone}
    )
    assert [row["config_changes"] for row in flagged] == [None, None, None]
    console = Console(width=300, record=True, file=io.StringIO())
    print_baselines(flagged, console, as_json=False)
    assert "unknown" in console.export_text()
