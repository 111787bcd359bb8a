"""docs/config.md lists every config and suite field, and is what the models say today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragcanary.config.model import Config, SuiteConfig, Thresholds
from ragcanary.config.target import TargetConfig

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
