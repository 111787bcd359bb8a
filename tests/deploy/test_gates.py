"""The release-gate examples work: the GitHub Actions workflow, the Argo Rollouts
AnalysisTemplate and the Flagger Canary with its webhook (docs/gate.md).

No cluster or runner is here, so each file is checked with the tool that reads it where one
exists (kubectl kustomize, kubernetes-validate, hadolint, GitHub's workflow schema as
check-jsonschema ships it, ragcanary validate) and by the fields docs/gate.md relies on for the
custom resources that kubernetes-validate has no schema for. tests/cli/test_gate_command.py runs the
commands themselves against real indexes.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import typer.main
import yaml
from gate_commands import (
    ARGO,
    FLAGGER,
    GATE_STEP,
    WORKFLOW,
    argo_job_spec,
    config_option,
    documented,
    flagger_webhook,
    load,
    workflow_step,
)
from typer.testing import CliRunner

from ragcanary.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes" / "base"
KUBERNETES_VERSIONS = ("1.28", kubernetes_validate.utils.latest_version())
# The options that write the gate's files.
FILES = {"--report", "--junit", "--markdown"}


def _tool(name: str) -> str:
    """A binary beside the interpreter (a dev dependency), else on PATH; skipped when absent."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed; `pip install -e '.[dev]'` installs it")
    return found


@functools.cache
def _render(directory: Path) -> list[dict[str, Any]]:
    """The resources of a kustomization, as `kubectl kustomize` renders them."""
    result = subprocess.run(
        [_tool("kubectl"), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [r for r in yaml.safe_load_all(result.stdout) if r]


def _one(resources: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r for r in resources if r["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _options(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs of a gate command line (``-c`` read as ``--config``)."""
    pairs = dict(zip(argv[2::2], argv[3::2], strict=True))
    if "-c" in pairs:
        pairs["--config"] = pairs.pop("-c")
    return pairs


def _check_config(directory: Path, data: dict[str, str], argv: list[str]) -> None:
    """The ConfigMap's files pass `ragcanary validate` where the pod mounts them, and name the
    suite and both targets of the command."""
    for key, text in data.items():
        (directory / key).write_text(text, encoding="utf-8")
    config = directory / "ragcanary.yaml"
    env = {"DOCS_SEARCH_TOKEN": "a-token"}
    result = CliRunner().invoke(app, ["validate", "-c", str(config)], env=env)
    assert result.exit_code == 0, result.output
    options = _options(argv)
    parsed = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert options["--suite"] in parsed["suites"]
    assert {options["--stable"], options["--candidate"]} <= set(parsed["targets"])


# -- every example ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", sorted(documented()))
def test_each_example_is_a_gate_command_with_only_the_real_options(source: str) -> None:
    argv = documented()[source]
    assert argv[:2] == ["ragcanary", "gate"]
    options = _options(argv)
    assert {"--config", "--suite", "--stable", "--candidate"} <= set(options)
    assert argv[config_option(argv)] == options["--config"]
    # Every option is one the real command has.
    command = cast(Any, typer.main.get_command(app)).commands["gate"]
    known = {opt for param in command.params for opt in param.opts}
    assert set(options) <= known, set(options) - known


def test_the_examples_agree_on_suite_and_targets() -> None:
    seen = {
        source: {k: v for k, v in _options(argv).items() if k in ("--suite", "--stable")}
        for source, argv in documented().items()
    }
    assert len({tuple(sorted(s.items())) for s in seen.values()}) == 1, seen


def test_each_gate_config_keeps_the_base_suite() -> None:
    """The examples carry the base's example suite; an edit to one is made to all."""
    base = (BASE / "core.yaml").read_text(encoding="utf-8")
    for directory in (ARGO, FLAGGER):
        assert (directory / "core.yaml").read_text(encoding="utf-8") == base, directory


# -- GitHub Actions -----------------------------------------------------------------------------


def test_the_workflow_passes_github_s_workflow_schema() -> None:
    result = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_workflow_promotes_only_after_the_gate_passed() -> None:
    workflow = load(WORKFLOW)
    jobs = workflow["jobs"]
    assert jobs["promote"]["needs"] == "gate"
    assert "if" not in jobs["promote"], "an `if: always()` would promote a worse index"
    step = workflow_step(GATE_STEP)
    assert "continue-on-error" not in step
    assert set(step["env"]) == {"DOCS_SEARCH_TOKEN"}
    # Everything after the gate reads its files whatever its exit code, but not when cancelled.
    steps = jobs["gate"]["steps"]
    after = steps[[s.get("name") for s in steps].index(GATE_STEP) + 1 :]
    assert after
    assert all("!cancelled()" in s["if"] for s in after), after
    written = {v for k, v in _options(shlex.split(step["run"])).items() if k in FILES}
    (upload,) = [s for s in after if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert written == {"gate.json", "gate.xml", "gate.md"}
    assert upload["with"]["path"] == "gate.*"


# -- Argo Rollouts ------------------------------------------------------------------------------


def test_argo_rollouts_renders_the_template_and_its_config() -> None:
    resources = _render(ARGO)
    assert {r["kind"] for r in resources} == {"AnalysisTemplate", "ConfigMap"}
    config_map = _one(resources, "ConfigMap")
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(config_map, version, strict=True)
    template = _one(resources, "AnalysisTemplate")
    assert template["apiVersion"] == "argoproj.io/v1alpha1"
    assert template["metadata"]["name"] == "ragcanary-gate"


def test_the_analysis_job_is_a_valid_job_that_fails_the_analysis_at_once() -> None:
    resources = _render(ARGO)
    (metric,) = _one(resources, "AnalysisTemplate")["spec"]["metrics"]
    assert set(metric) == {"name", "failureLimit", "provider"}
    assert metric["failureLimit"] == 0
    assert set(metric["provider"]) == {"job"}
    spec = metric["provider"]["job"]["spec"]
    assert spec["backoffLimit"] == 0
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gate"}, "spec": spec}
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == "ragcanary:0.1.0", "the base's image"
    assert "command" not in container, "the image's entrypoint is ragcanary"
    assert container["args"] == documented()["argo-rollouts"][1:]


def test_the_analysis_job_mounts_its_config_where_the_command_reads_it(tmp_path: Path) -> None:
    resources = _render(ARGO)
    pod = argo_job_spec()["template"]["spec"]
    rendered = _one(resources, "AnalysisTemplate")["spec"]["metrics"][0]["provider"]["job"]
    _mounted_config(rendered["spec"]["template"]["spec"], resources, "argo-rollouts", tmp_path)
    assert pod["securityContext"]["runAsNonRoot"] is True


# -- Flagger ------------------------------------------------------------------------------------


def test_flagger_renders_the_webhook_its_config_and_the_canary() -> None:
    resources = _render(FLAGGER)
    assert {r["kind"] for r in resources} == {"Deployment", "Service", "ConfigMap", "Canary"}
    for resource in resources:
        if resource["kind"] == "Canary":
            continue  # a custom resource: checked by the tests below
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(resource, version, strict=True)


def test_the_canary_calls_the_gate_before_any_traffic_and_waits_for_it() -> None:
    resources = _render(FLAGGER)
    canary, service = _one(resources, "Canary"), _one(resources, "Service")
    assert canary["apiVersion"] == "flagger.app/v1beta1"
    analysis = canary["spec"]["analysis"]
    assert analysis["threshold"] == 1
    (hook,) = analysis["webhooks"]
    assert hook == flagger_webhook()
    assert hook["type"] == "pre-rollout"
    # bash is the load tester's blocking type; cmd would answer 202 and never fail a rollout.
    assert hook["metadata"]["type"] == "bash"
    url = urlsplit(hook["url"])
    namespace = canary["metadata"]["namespace"]
    assert url.hostname == f"{service['metadata']['name']}.{namespace}"
    assert service["metadata"]["namespace"] == namespace
    assert (url.port or 80) == service["spec"]["ports"][0]["port"]
    (container,) = _one(resources, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[service["spec"]["ports"][0]["targetPort"]] == _loadtester_port()
    assert _minutes(hook["timeout"]) < _loadtester_timeout_minutes()
    probes = [container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]
    assert all(p["path"] == "/healthz" and p["port"] == "http" for p in probes)


def test_the_webhook_mounts_its_config_where_the_command_reads_it(tmp_path: Path) -> None:
    resources = _render(FLAGGER)
    pod = _one(resources, "Deployment")["spec"]["template"]["spec"]
    _mounted_config(pod, resources, "flagger", tmp_path)


def test_the_canary_s_services_are_the_gate_s_targets() -> None:
    """Flagger serves the stable pods as NAME-primary and the new ones as NAME-canary on the
    Canary's port: the gate's stable and candidate targets."""
    canary = load(FLAGGER / "canary.yaml")
    name, port = canary["spec"]["targetRef"]["name"], canary["spec"]["service"]["port"]
    options = _options(documented()["flagger"])
    targets = load(FLAGGER / "ragcanary.yaml")["targets"]
    stable = urlsplit(targets[options["--stable"]]["url"])
    candidate = urlsplit(targets[options["--candidate"]]["url"])
    assert (stable.hostname, stable.port) == (f"{name}-primary", port)
    assert (candidate.hostname, candidate.port) == (f"{name}-canary", port)


def test_the_webhook_image_passes_hadolint_and_builds_on_the_ragcanary_image() -> None:
    dockerfile = FLAGGER / "Dockerfile"
    result = subprocess.run(
        [_tool("hadolint"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text(encoding="utf-8")
    assert "ARG RAGCANARY_IMAGE=ragcanary:0.1.0" in text
    assert re.search(r"^FROM \$\{RAGCANARY_IMAGE\}$", text, re.M)
    assert re.search(
        r"^FROM ghcr\.io/fluxcd/flagger-loadtester:\d+\.\d+\.\d+ AS loadtester$", text, re.M
    )
    assert 'ENTRYPOINT ["flagger-loadtester"]' in text


# -- helpers ------------------------------------------------------------------------------------


def _mounted_config(
    pod: dict[str, Any], resources: list[dict[str, Any]], source: str, tmp_path: Path
) -> None:
    """The pod mounts the rendered ConfigMap at the directory of the command's --config, read
    only, and the files there validate."""
    argv = documented()[source]
    config = PurePosixPath(_options(argv)["--config"])
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {PurePosixPath(m["mountPath"]): m for m in container["volumeMounts"]}
    mount = mounts[config.parent]
    assert mount["readOnly"] is True
    config_map = _one(resources, "ConfigMap")
    assert volumes[mount["name"]]["configMap"]["name"] == config_map["metadata"]["name"]
    assert config.name in config_map["data"]
    secret = {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]}
    assert secret == {"ragcanary"}, "the base's Secret"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    directory = tmp_path / "etc"
    directory.mkdir()
    _check_config(directory, config_map["data"], argv)


def _dockerfile_cmd() -> list[str]:
    text = (FLAGGER / "Dockerfile").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith("CMD ")]
    return cast(list[str], yaml.safe_load(line.removeprefix("CMD ")))


def _loadtester_port() -> int:
    (port,) = [a.removeprefix("-port=") for a in _dockerfile_cmd() if a.startswith("-port=")]
    return int(port)


def _loadtester_timeout_minutes() -> float:
    (value,) = [a.removeprefix("-timeout=") for a in _dockerfile_cmd() if a.startswith("-timeout")]
    return _minutes(value)


def _minutes(value: str) -> float:
    found = re.fullmatch(r"(\d+)([smh])", value)
    assert found, f"{value!r} is not a duration like 10m"
    return int(found[1]) * {"s": 1 / 60, "m": 1, "h": 60}[found[2]]


def test_no_example_needs_a_database() -> None:
    """The gate stores nothing: its configs name no storage, so no volume is needed."""
    for directory in (ARGO, FLAGGER):
        assert "storage" not in load(directory / "ragcanary.yaml"), directory
