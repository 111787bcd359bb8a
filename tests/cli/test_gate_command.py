"""`ragcanary gate` end to end: a candidate index judged against the stable one before it is
promoted, both real Chroma collections on a real `chroma run` (docs/gate.md).

The stable collection holds, per canary, its relevant chunk (the query's own toy vector, so
always the nearest) and three others; one candidate is a copy of it, another a copy with the
relevant chunks of three canaries deleted, a third a server that is not there. The queries are
embedded by a deterministic OpenAI-compatible endpoint on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from chroma_server import chroma_server, create_collection, delete_chunks
from gate_commands import config_option, documented, workflow_step
from retrievers import EmbeddingServer
from server_process import free_port

pytestmark = pytest.mark.e2e

DIMENSIONS = 8
QUERIES = [f"how do I configure feature {i}" for i in range(10)]
LOST = 3  # canaries q0..q2 of the worse candidate lost their relevant document
COLLECTIONS = ("live", "next-equal", "next-lost")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Indexes:
    """The Chroma server and the embedding endpoint the targets use."""

    chroma: str
    embedder: str


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexes]:
    """A Chroma server with the stable collection and two candidates: equal, and worse."""
    data = tmp_path_factory.mktemp("chroma")
    try:
        with chroma_server(data) as url, EmbeddingServer(dimensions=DIMENSIONS) as embedder:
            made = {n: create_collection(url, n, QUERIES, DIMENSIONS) for n in COLLECTIONS}
            delete_chunks(url, made["next-lost"], [f"chunk-{i}-0" for i in range(LOST)])
            yield Indexes(url, embedder.url)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _target(indexes: Indexes, collection: str, url: str | None = None) -> dict[str, Any]:
    return {
        "preset": "chroma",
        "url": url or indexes.chroma,
        "collection": collection,
        "embedding": "toy",
        "id": "metadata.doc_id",
        "retries": 0,
        "timeout": "2s",
    }


def write_config(directory: Path, indexes: Indexes, names: dict[str, str] | None = None) -> Path:
    """A config whose targets are the stable collection and the candidates; ``names`` renames
    them (the docs' examples use their own)."""
    cases = [{"id": f"q{i}", "query": q, "relevant": [f"doc-{i}"]} for i, q in enumerate(QUERIES)]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    down = f"http://127.0.0.1:{free_port()}"
    targets = {
        "docs-live": _target(indexes, "live"),
        "docs-next": _target(indexes, "next-equal"),
        "docs-next-lost": _target(indexes, "next-lost"),
        "docs-next-down": _target(indexes, "live", url=down),
        # Its answers hold no metadata.document: a config that fits nothing it says.
        "docs-next-misread": {**_target(indexes, "next-equal"), "id": "metadata.document"},
    }
    names = names or {}
    config = {
        "storage": "sqlite:///ragcanary.db",
        "embeddings": {"toy": {"url": indexes.embedder, "model": "toy-1", "retries": 0}},
        "targets": {names.get(name, name): entry for name, entry in targets.items()},
        "suites": {
            "core": {
                "cases": "core.yaml",
                "targets": [names.get("docs-live", "docs-live")],
                "k": [1, 3],
                "depth": 3,
            }
        },
    }
    path = directory / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@dataclass
class Gated:
    """One `ragcanary gate` process: its exit code, what it printed, and the files it wrote."""

    code: int
    output: str
    directory: Path

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.directory / "gate.json").read_text())
        return data


def gate(directory: Path, config: Path, stable: str, candidate: str) -> Gated:
    """`ragcanary gate` with every file, as CI runs it."""
    args = ["gate", "-c", str(config), "--suite", "core", "--stable", stable]
    args += ["--candidate", candidate, "--report", "gate.json"]
    args += ["--junit", "gate.xml", "--markdown", "gate.md"]
    return run_gate(directory, args)


def run_gate(directory: Path, args: list[str]) -> Gated:
    """`ragcanary ARGS` in a process of its own, in ``directory``."""
    done = subprocess.run(
        [sys.executable, "-m", "ragcanary", *args],
        cwd=directory,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Gated(done.returncode, done.stdout + done.stderr, directory)


def test_an_equal_candidate_passes_the_gate(indexes: Indexes, tmp_path: Path) -> None:
    config = write_config(tmp_path, indexes)
    ran = gate(tmp_path, config, "docs-live", "docs-next")
    assert ran.code == 0, ran.output
    assert "PASS  gate · suite core · candidate docs-next vs stable docs-live" in ran.output
    assert "cause none" in ran.output
    assert "docs-next is not worse than docs-live: promote it" in ran.output
    report = ran.report()
    assert (report["verdict"], report["exit_code"]) == ("ok", 0)
    assert report["diagnosis"]["cause"] == "none"
    assert report["candidate"]["metrics"] == report["stable"]["metrics"]
    assert report["candidate"]["deltas"]["mrr"] == 0.0
    assert report["candidate"]["dropped"] == []
    suites = ET.parse(tmp_path / "gate.xml").getroot()
    assert (suites.get("failures"), suites.get("errors")) == ("0", "0")
    assert (tmp_path / "gate.md").read_text().startswith("# ✅ not worse: ragcanary gate")


def test_a_candidate_that_lost_documents_fails_the_gate_and_names_them(
    indexes: Indexes, tmp_path: Path
) -> None:
    config = write_config(tmp_path, indexes)
    ran = gate(tmp_path, config, "docs-live", "docs-next-lost")
    assert ran.code == 1, ran.output
    said = " ".join(ran.output.split())
    assert "WORSE gate · suite core · candidate docs-next-lost vs stable docs-live" in said
    assert "cause index_lost: 3 judged documents left the index: doc-0, doc-1, doc-2" in said
    assert "index_lost: canaries q0, q1, q2; ids doc-0, doc-1, doc-2; looked up at" in said
    assert "docs-next-lost is worse than docs-live: do not promote it" in said

    report = ran.report()
    assert (report["verdict"], report["exit_code"]) == ("regression", 1)
    diagnosis = report["diagnosis"]
    assert diagnosis["cause"] == "index_lost"
    assert diagnosis["causes"][0]["ids"] == ["doc-0", "doc-1", "doc-2"]
    assert diagnosis["checked"]["index_lookup"] is True
    stable, candidate = report["stable"], report["candidate"]
    assert (stable["target"], candidate["target"]) == ("docs-live", "docs-next-lost")
    # Each lost canary's only relevant document is gone: reciprocal rank 0 for 3 of 10.
    assert stable["metrics"]["mrr"] == 1.0
    assert candidate["metrics"]["mrr"] == pytest.approx(1.0 - LOST / len(QUERIES), abs=1e-12)
    assert candidate["deltas"]["hit_rate@3"] == pytest.approx(-LOST / len(QUERIES), abs=1e-12)
    assert 0.0 < candidate["p_values"]["hit_rate@3"] <= 1.0
    assert candidate["win_tie_loss"]["hit_rate@3"] == [0, len(QUERIES) - LOST, LOST]
    assert "mrr" in candidate["dropped"]
    assert any("left the index" in reason for reason in report["reasons"])
    lost = report["reports"]["candidate"]["cases"][0]["vs_baseline"]["lost"]
    assert lost == [{"id": "doc-0", "why": "not_in_index"}]
    assert report["reports"]["candidate"]["baseline"]["run_id"] == stable["run_id"]

    junit = ET.parse(tmp_path / "gate.xml").getroot()
    assert int(junit.get("failures") or 0) >= LOST
    markdown = (tmp_path / "gate.md").read_text()
    assert markdown.startswith("# ❌ worse: ragcanary gate of `docs-next-lost`")
    assert "**Cause** `index_lost`" in markdown


def test_an_unreachable_candidate_is_unavailable_not_worse(
    indexes: Indexes, tmp_path: Path
) -> None:
    config = write_config(tmp_path, indexes)
    ran = gate(tmp_path, config, "docs-live", "docs-next-down")
    assert ran.code == 3, ran.output
    said = " ".join(ran.output.split())
    assert "UNAVAILABLE gate" in said
    assert "docs-next-down answered too few canaries (coverage 0%)" in said
    assert "connect_error" in said
    report = ran.report()
    assert (report["verdict"], report["exit_code"]) == ("unavailable", 3)
    assert report["candidate"]["outcome"] == "unavailable"
    assert report["diagnosis"]["cause"] == "outage"


def test_an_unreachable_stable_target_is_unavailable_too(indexes: Indexes, tmp_path: Path) -> None:
    config = write_config(tmp_path, indexes)
    ran = gate(tmp_path, config, "docs-next-down", "docs-next")
    assert ran.code == 3, ran.output
    assert ran.report()["stable"]["outcome"] == "unavailable"
    names = {s.get("name") for s in ET.parse(tmp_path / "gate.xml").getroot()}
    assert names == {"ragcanary.core.docs-next-down", "ragcanary.core.docs-next"}


def test_a_candidate_whose_answers_fit_no_config_is_a_located_config_error(
    indexes: Indexes, tmp_path: Path
) -> None:
    config = write_config(tmp_path, indexes)
    ran = gate(tmp_path, config, "docs-live", "docs-next-misread")
    assert ran.code == 2, ran.output
    said = " ".join(ran.output.split())
    assert "ragcanary: targets.docs-next-misread.id: " in said
    assert f"({config} line " in said
    assert "CONFIG ERROR gate" in said
    assert ran.report()["verdict"] == "config"


@pytest.mark.parametrize(
    ("option", "stable", "candidate", "suite"),
    [
        ("--candidate", "docs-live", "docs-nxt", "core"),
        ("--stable", "docs-lve", "docs-next", "core"),
        ("--suite", "docs-live", "docs-next", "cor"),
    ],
)
def test_an_unknown_target_or_suite_is_a_config_error_naming_the_known_ones(
    indexes: Indexes, tmp_path: Path, option: str, stable: str, candidate: str, suite: str
) -> None:
    from typer.testing import CliRunner

    from ragcanary.cli.app import app

    config = write_config(tmp_path, indexes)
    args = ["gate", "-c", str(config), "--suite", suite, "--stable", stable]
    result = CliRunner().invoke(app, [*args, "--candidate", candidate])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    wrong = {"--candidate": candidate, "--stable": stable, "--suite": suite}[option]
    assert f"ragcanary: {option} {wrong}: no such " in said
    assert f"in {config}; the config has: " in said
    known = "core" if option == "--suite" else "docs-live, docs-next, docs-next-down"
    assert known in said
    assert not (tmp_path / "gate.json").exists()


@pytest.mark.parametrize("source", sorted(documented()))
def test_each_documented_gate_command_passes_an_equal_index_and_fails_a_worse_one(
    indexes: Indexes, tmp_path: Path, source: str
) -> None:
    """The exact command of docs/gate.md, the workflow, the AnalysisTemplate and the Canary,
    its --config pointed at a config with the same target and suite names."""
    argv = documented()[source]
    assert argv[:2] == ["ragcanary", "gate"], argv
    verdicts = {}
    for case, candidate in (("equal", "docs-next"), ("worse", "docs-next-lost")):
        directory = tmp_path / case
        directory.mkdir()
        names = {"docs-live": "docs-search", candidate: "docs-search-next"}
        args = list(argv[1:])
        args[config_option(argv) - 1] = str(write_config(directory, indexes, names))
        verdicts[case] = ran = run_gate(directory, args)
        if case == "worse":
            assert "cause index_lost: 3 judged documents left the index" in ran.output
    assert verdicts["equal"].code == 0, verdicts["equal"].output
    assert verdicts["worse"].code == 1, verdicts["worse"].output
    if "--report" in argv:
        assert verdicts["worse"].report()["diagnosis"]["cause"] == "index_lost"
    if source == "workflow":
        _read_like_the_summary_step(verdicts["worse"].report())


def _read_like_the_summary_step(report: dict[str, Any]) -> None:
    """Each `jq -r PATH gate.json` of the workflow's summary step finds a value."""
    paths = re.findall(r"jq -r (\S+) gate\.json", workflow_step("Summary")["run"])
    assert paths, "the summary step reads nothing"
    for path in paths:
        value: Any = report
        for key in path.lstrip(".").split("."):
            assert isinstance(value, dict), f"{path}: {value!r} is not an object"
            assert key in value, f"{path}: no {key!r}"
            value = value[key]
        assert value is not None, path
