"""`ragcanary judgments` on a local config: list, show, accept (the suite file written), reject,
and the agreement, with the exit codes of a refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.store.judgments import JudgmentStore, Wanted
from ragcanary.store.storage import Store

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
SUITE = "# kept\ncases:\n  - id: c1\n    query: what is alpha\n    relevant: [a]  # by hand\n"


def _setup(tmp_path: Path) -> tuple[Path, list[int]]:
    (tmp_path / "core.yaml").write_text(SUITE, encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    db = tmp_path / "db.sqlite"
    path.write_text(
        f"storage: sqlite:///{db}\n"
        "judges:\n  j: {kind: chat, url: 'http://127.0.0.1:9/v1/chat/completions', model: m}\n"
        "targets:\n  search: {url: 'http://127.0.0.1:9/search', body: {q: '{query}'}}\n"
        "suites:\n  core: {cases: core.yaml, targets: [search], judge: j}\n",
        encoding="utf-8",
    )
    with Store.from_url(f"sqlite:///{db}") as store:
        store.migrate()
        found = JudgmentStore(store)
        wanted = [Wanted("core", "search", "c1", d, "what is alpha", "run-1") for d in "xyz"]
        claimed = found.claim(wanted, "j", "chat:v1:abc", NOW, limit=10)
        for judgment, grade in zip(claimed, (2, 1, 0), strict=True):
            found.record(judgment.id, grade, None, None)
    return path, [j.id for j in claimed]


def _cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_review_from_the_command_line(tmp_path: Path) -> None:
    path, (x, y, z) = _setup(tmp_path)
    listed = _cli("judgments", "list", "-c", str(path), "--json")
    assert listed.exit_code == 0, listed.output
    assert [r["doc_id"] for r in json.loads(listed.output)] == ["z", "y", "x"]
    table = _cli("judgments", "list", "-c", str(path))
    assert "proposed" in table.output
    shown = _cli("judgments", "show", str(x), "-c", str(path))
    assert "grade 2" in shown.output
    assert "what is alpha" in shown.output
    accepted = _cli("judgments", "accept", str(x), "-c", str(path))
    assert accepted.exit_code == 0, accepted.output
    assert "x is grade 2 in case c1" in accepted.output
    text = (tmp_path / "core.yaml").read_text()
    assert "relevant: {a: 1, x: 2} # by hand" in text
    assert text.startswith("# kept\n")
    assert _cli("judgments", "reject", str(y), "-c", str(path)).exit_code == 0
    again = _cli("judgments", "reject", str(y), "-c", str(path))
    assert again.exit_code == 2
    assert "is rejected, not proposed" in again.output
    assert _cli("judgments", "show", "99", "-c", str(path)).exit_code == 2
    agreement = _cli("judgments", "agreement", "-c", str(path), "--json")
    assert agreement.exit_code == 0, agreement.output
    shown_agreement = json.loads(agreement.output)
    # x: judge relevant, people agree; y: judge relevant (grade 1), people disagree.
    assert shown_agreement["pairs"] == 2
    assert shown_agreement["table"] == {
        "both_relevant": 1,
        "judge_only": 1,
        "person_only": 0,
        "neither": 0,
    }
    assert shown_agreement["kappa"] == 0.0
    assert z
