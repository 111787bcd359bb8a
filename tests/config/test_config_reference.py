"""docs/config.md lists every config and suite field, and is what the models say today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragcanary.config.model import Config, SuiteConfig, Thresholds
from ragcanary.config.target import TargetConfig
from ragcanary.probe.runner import PACE, PACED_GAP_BELOW_S, START_SPREAD_S

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_config_reference.py"


def test_the_page_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_field_of_every_model_is_on_the_page() -> None:
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    for model in (Config, TargetConfig, SuiteConfig, Thresholds):
        for name in model.model_fields:
            assert f"| `{name}` |" in page, f"{model.__name__}.{name} is missing"
    for name in ("id", "query", "relevant", "tags", "weight", "min_score", "max_score"):
        assert f"| `{name}` |" in page


def test_the_concurrency_row_states_the_runner_s_pacing() -> None:
    """The page once said starts are kept 0.6 of L/C apart after the runner moved to 0.8:
    the script had the figures typed in, so the page matched the script and not the code."""
    page = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `concurrency` |"))
    assert f"spread over {START_SPREAD_S * 1000:g} ms" in row
    assert f"less than {PACED_GAP_BELOW_S * 1000:g} ms apart" in row
    assert f"keeps them {PACE:g} of the fastest answer's latency" in row
