"""`ragcanary calibrate --power` against a retriever of known noise, checked by simulation."""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from retrievers import FakeRetriever, graded_corpus, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.measure.stats import permutation_test
from ragcanary.measure.verdict import Policy

API_KEY = "sk-power-5d20e1"
CANARIES = 40
FLIP = 0.25  # chance that a noisy canary's relevant document falls to rank 6 in one request
QUERIES = [f"question {i}" for i in range(CANARIES)]
NOISY = frozenset(QUERIES[::2])  # every other canary is noisy, the rest never move
RUNS = 12
TRIALS = 300


@dataclass
class NoisyRetriever(FakeRetriever):
    """A retriever whose noisy queries, on each request with chance ``flip``, rank their
    relevant document 6th instead of 1st to 3rd (out of hit_rate@5); scores stay sorted."""

    flip: float = FLIP
    rng: random.Random = field(default_factory=lambda: random.Random(2026))
    _draw: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ranked(self, query: str, top_k: int) -> list[tuple[str, float]]:
        hits = super().ranked(query, len(self.corpus.get(query, [])))
        with self._draw:
            moved = query in NOISY and self.rng.random() < self.flip
        if moved:
            ids = [doc for doc, _ in hits]
            relevant = next(i for i, doc in enumerate(ids) if doc.startswith("rel-"))
            ids.insert(5, ids.pop(relevant))
            hits = [(doc, score) for doc, (_, score) in zip(ids, hits, strict=True)]
        return hits[:top_k]


def _config(tmp_path: Path, url: str) -> Path:
    cases = [
        {"id": f"c{i}", "query": query, "relevant": [f"rel-{i}"]} for i, query in enumerate(QUERIES)
    ]
    (tmp_path / "suite.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    config = tmp_path / "ragcanary.yaml"
    targets = json.dumps({"vendor": target_entry(url, retries=0)})
    config.write_text(
        f"storage: sqlite:///{tmp_path / 'ragcanary.db'}\ntargets: {targets}\n"
        "suites:\n  core:\n    cases: suite.yaml\n    targets: [vendor]\n    k: [5]\n"
        "    depth: 10\n",
        encoding="utf-8",
    )
    return config


def _calibrate(config: Path, *options: str) -> tuple[int, str]:
    args = ["calibrate", "-c", str(config), "--suite", "core", "--target", "vendor"]
    result = CliRunner().invoke(
        app, [*args, "--runs", str(RUNS), *options], env={"VENDOR_KEY": API_KEY, "COLUMNS": "220"}
    )
    return result.exit_code, result.output


def _row(out: str, metric: str) -> list[str]:
    """The cells of ``metric``'s row in the power table (the last table that names it)."""
    rows = [line for line in out.splitlines() if re.match(rf"│ {re.escape(metric)}\s", line)]
    return [cell.strip() for cell in rows[-1].strip("│").split("│")]


def _detection_rate(drop: float, rng: random.Random) -> float:
    """The verdict's detection rate at an expected hit_rate@5 drop of ``drop``, simulated from
    the retriever's known noise: a noisy canary misses its hit in a run with chance FLIP, and
    each canary loses its relevant document with chance drop / mean. Judged by the verdict's
    rule with its own permutation test: paired mean drop over max_drop and p below 0.05."""
    policy = Policy()
    mean = 1.0 - FLIP * len(NOISY) / CANARIES
    share = drop / mean
    hits = 0
    for _ in range(TRIALS):
        deltas = []
        for query in QUERIES:
            noisy = query in NOISY
            before = 0.0 if noisy and rng.random() < FLIP else 1.0
            after = 0.0 if noisy and rng.random() < FLIP else 1.0
            if rng.random() < share:
                after = 0.0
            deltas.append(after - before)
        beyond = -sum(deltas) / len(deltas) > policy.max_drop + 1e-12
        hits += beyond and permutation_test(deltas, seed=policy.seed) < policy.significance
    return hits / TRIALS


def test_printed_minimum_detectable_drop_is_caught_four_times_in_five(tmp_path: Path) -> None:
    """The printed hit_rate@5 drop, injected into runs of the known noise, is detected
    0.8 ± 0.12 of the time. The tolerance is three standard errors of what it adds up: this
    simulation (300 pairs: 0.023), the command's quantile (1,000 pairs: 0.013) and its noise
    estimate from 12 runs of 40 canaries (the noisy canaries' flip rate to about 7 %: 0.03)."""
    with NoisyRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        code, out = _calibrate(_config(tmp_path, retriever.url), "--power")
    assert code == 0, out
    assert "power of the verdict on core: 40 canaries, 80% power at significance 0.05" in out
    assert "noisy target" in out
    assert "drop model: each canary independently loses its relevant documents" in out
    _, mean, noise, drop, affected = _row(out, "hit_rate@5")
    assert 0.75 < float(mean) < 1.0
    assert float(noise) > 0
    assert affected.endswith("%")
    rate = _detection_rate(float(drop), random.Random(7))
    assert abs(rate - 0.8) <= 0.12, (drop, rate)
    # A drop a fifth smaller is caught clearly less often: the check can fail.
    assert _detection_rate(0.8 * float(drop), random.Random(8)) < rate


def test_drop_prints_the_canaries_it_needs(tmp_path: Path) -> None:
    """A drop of 0.3 needs fewer canaries than the suite has (its minimum detectable drop is
    smaller); a drop within max_drop is never detected."""
    with NoisyRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        config = _config(tmp_path, retriever.url)
        code, out = _calibrate(config, "--drop", "0.3")
        assert code == 0, out
        *_, drop, _affected, needed = _row(out, "hit_rate@5")
        assert float(drop) < 0.3
        assert 0 < int(needed.replace(",", "")) < CANARIES
        code, out = _calibrate(config, "--power", "--drop", "0.02")
    assert code == 0, out
    assert _row(out, "hit_rate@5")[-1] == "never (not above max_drop)"


def test_drop_outside_zero_to_one_is_a_usage_error(tmp_path: Path) -> None:
    code, out = _calibrate(_config(tmp_path, "http://127.0.0.1:9/v2/query"), "--drop", "1.5")
    assert code == 2
    assert "--drop 1.5" in out
