"""The `ragcanary gate` command lines that docs/gate.md and the deployment examples give, read
from those files: the GitHub Actions workflow, the Argo Rollouts AnalysisTemplate and the
Flagger Canary (docs/gate.md)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "deploy" / "ci" / "ragcanary-gate.yml"
GATES = ROOT / "deploy" / "kubernetes" / "gates"
ARGO = GATES / "argo-rollouts"
FLAGGER = GATES / "flagger"
PAGE = ROOT / "docs" / "gate.md"
GATE_STEP = "Gate the candidate index"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def workflow_step(name: str) -> dict[str, Any]:
    """The step ``name`` of the workflow's job ``gate``."""
    steps = load(WORKFLOW)["jobs"]["gate"]["steps"]
    (step,) = [s for s in steps if s.get("name") == name]
    return dict(step)


def argo_job_spec() -> dict[str, Any]:
    """The Job spec of the AnalysisTemplate's one metric."""
    (metric,) = load(ARGO / "analysistemplate.yaml")["spec"]["metrics"]
    return dict(metric["provider"]["job"]["spec"])


def flagger_webhook() -> dict[str, Any]:
    """The Canary's one webhook."""
    (hook,) = load(FLAGGER / "canary.yaml")["spec"]["analysis"]["webhooks"]
    return dict(hook)


def page_commands() -> list[list[str]]:
    """Every `ragcanary gate` line of docs/gate.md's shell blocks, split as a shell would."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    lines = [line for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("ragcanary gate ")]


def documented() -> dict[str, list[str]]:
    """Each gate command line by where it is given, as argv (``ragcanary`` first)."""
    (container,) = argo_job_spec()["template"]["spec"]["containers"]
    found = {
        "workflow": shlex.split(workflow_step(GATE_STEP)["run"]),
        "argo-rollouts": ["ragcanary", *container["args"]],
        "flagger": shlex.split(flagger_webhook()["metadata"]["cmd"]),
    }
    found.update({f"docs/gate.md {i}": argv for i, argv in enumerate(page_commands())})
    return found


def config_option(argv: list[str]) -> int:
    """The index of the config file's path in ``argv`` (after ``-c`` or ``--config``)."""
    (index,) = [i + 1 for i, arg in enumerate(argv) if arg in ("-c", "--config")]
    return index
