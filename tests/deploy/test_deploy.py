"""The deployment files work: the image's build steps, docker compose, Kubernetes manifests.

No Docker engine or cluster runs here, so each file is checked with the real tool that reads
it (hadolint, promtool, kubectl kustomize, kubernetes-validate, ragcanary validate) and the
image's install steps are run in a fresh virtualenv.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import kubernetes_validate
import pytest
import yaml
from daemon_harness import free_port, parse_metrics, wait_for
from prometheus_server import prometheus_binary
from retrievers import DEFAULT_API_KEY, FakeRetriever, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.config.model import Config
from ragcanary.serve.http.api import create_app
from ragcanary.serve.http.hosts import OPEN_PATHS, HostRule

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "docker-compose.yml"
KUSTOMIZATIONS = {
    "base": DEPLOY / "kubernetes" / "base",
    "postgres": DEPLOY / "kubernetes" / "overlays" / "postgres",
}
# The oldest Kubernetes we support and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.28", kubernetes_validate.utils.latest_version())
# Custom resources of the Prometheus Operator: kubernetes-validate has no schema for them.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
STACK = {"ragcanary", "retriever", "prometheus", "alertmanager", "grafana"}
DEADLINE_S = 120.0  # generous: two cores shared by many test runs


def _tool(name: str) -> str:
    """The path of an external binary; the test skips, saying why, when it is not installed."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not on PATH; install it to run this check")
    return path


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _validate(config: Path, env: dict[str, str]) -> str:
    """Run `ragcanary validate` on ``config`` with only ``env`` of the RAGCANARY_* settings."""
    unset = {name: None for name in os.environ if name.startswith("RAGCANARY_")}
    result = CliRunner().invoke(app, ["validate", "-c", str(config)], env={**unset, **env})
    assert result.exit_code == 0, result.output
    return result.output


# -- Dockerfile --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str  # the rest of the logical line, continuations joined


def _instructions(path: Path) -> list[Instruction]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, args = line.partition(" ")
            out.append(Instruction(keyword.upper(), args.strip()))
    return out


def _stages(path: Path) -> list[list[Instruction]]:
    """The instructions of each build stage, each starting with its FROM."""
    stages: list[list[Instruction]] = []
    for instruction in _instructions(path):
        if instruction.keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _final(keyword: str) -> Instruction:
    """The last ``keyword`` instruction of the final stage (the one that decides)."""
    found = [i for i in _stages(DOCKERFILE)[-1] if i.keyword == keyword]
    assert found, f"the final stage of {DOCKERFILE} has no {keyword}"
    return found[-1]


def _exec_form(instruction: Instruction) -> list[str]:
    """The command of an ENTRYPOINT, CMD or HEALTHCHECK, which must be a JSON list."""
    args = instruction.args
    if instruction.keyword == "HEALTHCHECK":  # options first: HEALTHCHECK --interval=30s CMD [...]
        args = args[args.index(" CMD ") + len(" CMD ") :]
    value = json.loads(args)
    assert isinstance(value, list), f"{instruction.keyword} is not in exec form: {args}"
    return [str(v) for v in value]


def _config_in_image() -> PurePosixPath:
    """The config file the image's default command serves."""
    command = _exec_form(_final("CMD"))
    return PurePosixPath(command[command.index("--config") + 1])


def _image_uid() -> int:
    return int(_final("USER").args.split(":")[0])


def _storage_dir(storage_url: str) -> PurePosixPath:
    assert storage_url.startswith("sqlite:////"), f"not an absolute SQLite path: {storage_url}"
    return PurePosixPath(storage_url.removeprefix("sqlite:///")).parent


def test_dockerfile_passes_hadolint() -> None:
    """hadolint ships as a dev dependency, so it is never skipped."""
    hadolint = Path(sys.executable).with_name("hadolint")
    binary = str(hadolint) if hadolint.exists() else _tool("hadolint")
    result = subprocess.run(
        [binary, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_as_a_fixed_non_root_uid() -> None:
    """A numeric user lets Kubernetes' runAsNonRoot verify it without reading /etc/passwd."""
    user = _final("USER").args
    assert re.fullmatch(r"\d+(:\d+)?", user), f"USER {user} is not numeric"
    assert _image_uid() != 0


def test_base_images_are_pinned_python_311_slim() -> None:
    stages = _stages(DOCKERFILE)
    assert len(stages) >= 2, "the image should be built in a builder stage and a runtime stage"
    for stage in stages:
        image = stage[0].args.split()[0]
        name, _, tag = image.partition(":")
        assert name == "python", image
        assert re.fullmatch(r"3\.11\.\d+-slim(-\w+)?", tag), f"{image} is not pinned to a release"


def test_healthcheck_asks_healthz_with_python() -> None:
    command = _exec_form(_final("HEALTHCHECK"))
    assert command[0] == "python", "the slim image has no curl"
    assert "/healthz" in command[-1]


def test_image_serves_its_config_volume_and_exposes_the_port() -> None:
    assert _exec_form(_final("ENTRYPOINT")) == ["ragcanary"]
    assert _exec_form(_final("CMD"))[0] == "serve"
    volumes = json.loads(_final("VOLUME").args)
    assert str(_config_in_image().parent) in volumes
    compose_config = _load(DEPLOY / "compose" / "ragcanary.yaml")
    assert str(_storage_dir(compose_config["storage"])) in volumes
    assert _final("EXPOSE").args == compose_config["listen"].rpartition(":")[2]


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` out of the build context.

    Docker's rule: the last pattern that matches the path or one of its parent directories
    decides; ``!`` re-includes; ``**/`` matches any number of directories, including none.
    """
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.removeprefix("!").strip("/")
        globs = {glob, glob.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(c, g) for c in candidates for g in globs):
            ignored = not negated
    return ignored


def _copy_sources() -> list[str]:
    """What the Dockerfile copies from the build context (not from another stage)."""
    sources = []
    for instruction in _instructions(DOCKERFILE):
        if instruction.keyword == "COPY" and "--from" not in instruction.args:
            sources += [s.removeprefix("./") for s in shlex.split(instruction.args)[:-1]]
    return sources


def test_dockerignore_keeps_what_the_dockerfile_copies_and_drops_the_rest() -> None:
    patterns = _dockerignore()
    assert _copy_sources(), "the Dockerfile copies nothing"
    for source in _copy_sources():
        assert not _ignored(source, patterns), f"{source} is copied but .dockerignore drops it"
    for other in (".venv", ".git", "tests", "src/ragcanary/__pycache__/cli.cpython-311.pyc"):
        assert _ignored(other, patterns), f"{other} would be sent to the Docker daemon"


def _build_context(into: Path) -> Path:
    """The files of the repository that the Dockerfile copies and .dockerignore lets through."""
    patterns = _dockerignore()
    for source in _copy_sources():
        path = ROOT / source
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            if not _ignored(relative, patterns):
                (into / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, into / relative)
    return into


def _pip_steps(stage: list[Instruction]) -> list[str]:
    """The shell commands of a stage's RUN instructions that call pip."""
    steps = []
    for instruction in stage:
        if instruction.keyword == "RUN" and " pip " in instruction.args:
            words = [w for w in instruction.args.split() if not w.startswith("--mount=")]
            steps.append(" ".join(words))
    return steps


def _run_step(
    command: str, wheels: Path, python_bin: Path, cwd: Path, args: dict[str, str] | None = None
) -> None:
    """Run one of the Dockerfile's shell commands with ``python`` from ``python_bin``.

    ``args`` are the build arguments (``ARG``) the command sees, as ``docker build`` passes them.
    """
    path = f"{python_bin}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(
        ["bash", "-euc", command.replace("/wheels", str(wheels))],
        cwd=cwd,
        env={**os.environ, "EXTRAS": "", **(args or {}), "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"


def _install_image(tmp: Path, build_args: dict[str, str]) -> Path:
    """A fresh virtualenv set up by the Dockerfile's own pip steps, as in the image; its bin."""
    context = _build_context(tmp / "context")
    wheels = tmp / "wheels"
    builder, runtime = _stages(DOCKERFILE)[0], _stages(DOCKERFILE)[-1]
    assert _pip_steps(builder), "the builder stage runs no pip"
    assert _pip_steps(runtime), "the runtime stage runs no pip"
    for step in _pip_steps(builder):
        _run_step(step, wheels, Path(sys.executable).parent, cwd=context)
    venv.create(tmp / "venv", with_pip=True)
    bin_dir = tmp / "venv" / "bin"
    for step in _pip_steps(runtime):
        _run_step(step, wheels, bin_dir, cwd=tmp, args=build_args)
    return bin_dir


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image as the compose stack builds it (with its build args: the demo extra)."""
    build_args = _services()["ragcanary"]["build"].get("args", {})
    return _install_image(tmp_path_factory.mktemp("image"), build_args)


@pytest.fixture(scope="module")
def production_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image as built for production: no build args, so no extras."""
    return _install_image(tmp_path_factory.mktemp("production"), {})


def _output(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


# -- docker compose ----------------------------------------------------------------------------


def _services() -> dict[str, Any]:
    return cast(dict[str, Any], _load(COMPOSE)["services"])


def _bind_mounts(service: dict[str, Any]) -> list[tuple[Path, PurePosixPath]]:
    """(host path, container path) of a service's bind mounts; named volumes are left out."""
    mounts = []
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        if host.startswith((".", "/")):
            mounts.append(((DEPLOY / host).resolve(), PurePosixPath(container)))
    return mounts


def _container_files(service: dict[str, Any], root: Path) -> Path:
    """Copy what a service's bind mounts show it under ``root``, as the container sees it."""
    for host, container in _bind_mounts(service):
        target = root / container.relative_to("/")
        if host.is_dir():
            shutil.copytree(host, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(host, target)
    return root


def _compose_env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as compose sets it when the host exports nothing."""
    default = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}")
    return {k: default.sub(r"\1", str(v)) for k, v in service.get("environment", {}).items()}


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _published(service: dict[str, Any]) -> set[int]:
    return {int(mapping.split(":")[-1]) for mapping in service.get("ports", [])}


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_runs_the_whole_stack_from_pinned_images() -> None:
    services = _services()
    assert set(services) == STACK
    for name, service in services.items():
        if "build" in service:
            assert (DEPLOY / service["build"]["context"]).resolve() == ROOT, name
            assert ROOT / service["build"]["dockerfile"] == DOCKERFILE, name
        else:
            image, _, tag = service["image"].partition(":")
            assert tag not in ("", "latest"), f"{name}: pin {image} to a release"


def test_compose_mounts_only_files_that_exist() -> None:
    mounts = [(name, m) for name, s in _services().items() for m in _bind_mounts(s)]
    assert len(mounts) >= 6
    for name, (host, _container) in mounts:
        assert host.exists(), f"service {name} mounts {host}, which does not exist"


def test_compose_ragcanary_config_validates_as_mounted(tmp_path: Path) -> None:
    ragcanary = _services()["ragcanary"]
    root = _container_files(ragcanary, tmp_path)
    output = _validate(root / _config_in_image().relative_to("/"), _compose_env(ragcanary))
    assert "1 suites" in output
    assert int(re.findall(r"(\d+) cases", output)[0]) > 50, "the demo suite should be mounted"


def test_compose_services_find_each_other() -> None:
    """The URLs in each config name the service and port that really answer there."""
    services = _services()
    config = _load(DEPLOY / "compose" / "ragcanary.yaml")
    retriever = [*services["retriever"]["entrypoint"], *services["retriever"]["command"]]
    (target,) = config["targets"].values()
    url = urlsplit(target["url"])
    assert (url.hostname, url.port) == ("retriever", int(_option(retriever, "--port")))
    listen = _port(config["listen"])
    assert listen in _published(services["ragcanary"])
    prometheus = _load(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = prometheus["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"ragcanary:{listen}"]
    (alertmanagers,) = prometheus["alerting"]["alertmanagers"]
    (alertmanager,) = alertmanagers["static_configs"][0]["targets"]
    assert _port(alertmanager) in _published(services["alertmanager"])
    assert alertmanager.partition(":")[0] == "alertmanager"


def test_compose_answers_its_scrape_and_its_links_but_no_other_host() -> None:
    """Prometheus scrapes by the service name (an open path), links and browsers on the host
    use ui_url's localhost; a name of another site is refused (DNS rebinding)."""
    config = Config.model_validate(_load(DEPLOY / "compose" / "ragcanary.yaml"))
    rule = HostRule.of(config)
    container_ip = "172.18.0.3"  # where a request published on the host arrives
    prometheus = _load(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = prometheus["scrape_configs"]
    assert job.get("metrics_path", "/metrics") in OPEN_PATHS
    assert rule.accepts(urlsplit(str(config.ui_url)).hostname or "", container_ip)
    assert rule.accepts("127.0.0.1", container_ip)
    assert not rule.accepts("rebind.attacker.example", container_ip)


def test_compose_prometheus_config_and_rules_pass_promtool() -> None:
    config = DEPLOY / "prometheus" / "prometheus.yml"
    assert _load(config)["rule_files"] == ["alerts.yml", "slo.yml"]
    result = subprocess.run(
        [prometheus_binary("promtool"), "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rules found" in result.stdout, "prometheus.yml loads no rules"


def test_compose_prometheus_sees_its_config_and_rules_in_one_mount() -> None:
    (mount,) = _bind_mounts(_services()["prometheus"])
    assert mount == (DEPLOY / "prometheus", PurePosixPath("/etc/prometheus"))
    assert "--config.file=/etc/prometheus/prometheus.yml" in _services()["prometheus"]["command"]


def test_alertmanager_routes_only_to_defined_receivers() -> None:
    config = _load(DEPLOY / "alertmanager" / "alertmanager.yml")
    receivers = {r["name"] for r in config["receivers"]}

    def routed(route: dict[str, Any]) -> Iterator[str]:
        if "receiver" in route:
            yield route["receiver"]
        for child in route.get("routes", []):
            yield from routed(child)

    assert set(routed(config["route"])) <= receivers
    assert {"suite", "target"} <= set(config["route"]["group_by"])


# -- the image's install steps, end to end -----------------------------------------------------


@pytest.mark.slow
def test_installed_image_serves_the_compose_stack(image_venv: Path, tmp_path: Path) -> None:
    """Install as the Dockerfile does, then run the compose services' commands from that install.

    30-50 s: a wheel build, a virtualenv with every dependency, the BM25 index, one run.
    """
    from ragcanary import __version__

    ragcanary, python = str(image_venv / "ragcanary"), str(image_venv / "python")
    assert _output([ragcanary, "--version"]).strip() == f"ragcanary {__version__}"
    services = _services()

    retriever_port = free_port()
    command = [*services["retriever"]["entrypoint"], *services["retriever"]["command"]]
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(retriever_port)
    assert command[0] == "python"
    retriever_command = [python, *command[1:]]

    root = _container_files(services["ragcanary"], tmp_path / "root")
    config_file = root / _config_in_image().relative_to("/")
    config = _load(config_file)
    for target in config["targets"].values():
        target["url"] = (
            urlsplit(target["url"])._replace(netloc=f"127.0.0.1:{retriever_port}").geturl()
        )
    for suite in config["suites"].values():
        suite["every"] = "2s"  # the first run starts within this, not within the usual jitter
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    listen = f"127.0.0.1:{free_port()}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")},
        "RAGCANARY_LISTEN": listen,
        "RAGCANARY_STORAGE": f"sqlite:///{tmp_path / 'ragcanary.db'}",
    }
    serve = [ragcanary, *_exec_form(_final("CMD"))]
    serve[serve.index("--config") + 1] = str(config_file)
    healthcheck = _exec_form(_final("HEALTHCHECK"))
    healthcheck[0] = python

    def healthy() -> bool:
        check = subprocess.run(healthcheck, env=env, capture_output=True, timeout=30, check=False)
        return check.returncode == 0

    with _process(retriever_command, tmp_path / "retriever.log", env) as retriever:
        wait_for(
            lambda: _answers(f"http://127.0.0.1:{retriever_port}/healthz", retriever),
            DEADLINE_S,
            "the demo retriever to answer",
        )
        with _process(serve, tmp_path / "ragcanary.log", env) as daemon:
            wait_for(healthy, DEADLINE_S, "the image's HEALTHCHECK to pass")

            def answered_run() -> bool:
                _still_running(daemon)
                text = httpx.get(f"http://{listen}/metrics", timeout=10).text
                return any(
                    s.name == "ragcanary_runs_total" and s.labels["outcome"] == "ok" and s.value
                    for s in parse_metrics(text)
                )

            wait_for(answered_run, DEADLINE_S, "a run of the demo suite to pass")
            assert httpx.get(f"http://{listen}/readyz", timeout=10).status_code == 200
            # The wheel ships the runbooks the alerts link to, and the pages they render in.
            runbook = httpx.get(f"http://{listen}/ui/runbooks/RagCanaryRegression", timeout=10)
            assert runbook.status_code == 200, runbook.text
            assert '<h2 id="check-first">Check first</h2>' in runbook.text
            daemon.terminate()
            assert daemon.wait(timeout=60) == 0
        assert not healthy(), "the HEALTHCHECK passes with no daemon running"


def _still_running(process: subprocess.Popen[bytes]) -> None:
    """Stop a wait at once when the process it waits on has died (wait_for retries asserts)."""
    if process.poll() is not None:
        raise RuntimeError(f"{process.args} exited with {process.returncode}")


def _answers(url: str, process: subprocess.Popen[bytes]) -> bool:
    _still_running(process)
    return httpx.get(url, timeout=10).status_code == 200


@contextlib.contextmanager
def _process(
    command: list[str], log: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` with its output in ``log``; stop it on the way out."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            yield process
        except BaseException:
            print(f"--- {log.name}\n{log.read_text(errors='replace')}")
            raise
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


# -- Kubernetes --------------------------------------------------------------------------------


@functools.cache
def _render(name: str) -> list[dict[str, Any]]:
    """The resources of the base or an overlay, as `kubectl kustomize` renders them."""
    # No maintained pure-Python kustomize exists; kubectl (with kustomize built in) is on the
    # CI machine, so only a developer without it skips.
    kubectl = _tool("kubectl")
    result = subprocess.run(
        [kubectl, "kustomize", str(KUSTOMIZATIONS[name])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [r for r in yaml.safe_load_all(result.stdout) if r]


@pytest.fixture(params=sorted(KUSTOMIZATIONS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    """Each of the base and the overlays: its name and its rendered resources."""
    return request.param, _render(request.param)


def _one(resources: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in resources if r["kind"] == kind and name in (None, r["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _container(resources: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _one(resources, "Deployment")["spec"]["template"]["spec"]["containers"]
    return cast(dict[str, Any], container)


def _secret_value(resources: list[dict[str, Any]], name: str, key: str) -> str:
    secret = _one(resources, "Secret", name)
    if key in secret.get("stringData", {}):
        return str(secret["stringData"][key])
    return base64.b64decode(secret["data"][key]).decode()


def _env(resources: list[dict[str, Any]]) -> dict[str, str]:
    """The container's environment with every secretKeyRef resolved."""
    env = {}
    for var in _container(resources).get("env", []):
        if "value" in var:
            env[var["name"]] = str(var["value"])
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = _secret_value(resources, ref["name"], ref["key"])
    return env


def _mounts(resources: list[dict[str, Any]]) -> dict[PurePosixPath, dict[str, Any]]:
    """The pod's volumes by the path the container mounts them at."""
    spec = _one(resources, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    return {
        PurePosixPath(m["mountPath"]): volumes[m["name"]]
        for m in _container(resources).get("volumeMounts", [])
    }


def _config(resources: list[dict[str, Any]]) -> dict[str, Any]:
    data = _one(resources, "ConfigMap")["data"]
    return cast(dict[str, Any], yaml.safe_load(data[_config_in_image().name]))


def _storage(resources: list[dict[str, Any]]) -> str:
    """The storage URL the daemon uses: RAGCANARY_STORAGE beats the config's `storage:`."""
    return _env(resources).get("RAGCANARY_STORAGE") or str(_config(resources)["storage"])


def test_kubernetes_resources_validate_against_the_api_schemas(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    name, resources = rendered
    kinds = {r["kind"] for r in resources}
    expected = {"Deployment", "Service", "ConfigMap", "Secret", *OPERATOR_KINDS}
    # SQLite keeps its file on a claim; the replicas on PostgreSQL have a disruption budget.
    own = {"base": {"PersistentVolumeClaim"}, "postgres": {"PodDisruptionBudget"}}
    assert kinds == expected | own[name]
    for resource in resources:
        if resource["kind"] in OPERATOR_KINDS:
            continue  # no schema in kubernetes-validate; checked by the tests below
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(resource, version, strict=True)


def test_servicemonitor_scrapes_the_services_metrics_port(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, resources = rendered
    monitor, service = _one(resources, "ServiceMonitor"), _one(resources, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert ports[endpoint["port"]]["port"] == _port(_config(resources)["listen"])
    pod_labels = _one(resources, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


# The fields of a rule group and of a rule that the Prometheus Operator's CRD accepts.
GROUP_FIELDS = {"name", "interval", "rules", "limit", "query_offset", "partial_response_strategy"}
RULE_FIELDS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}


@pytest.mark.parametrize("name", ["ragcanary", "ragcanary-slo"])  # alerts.yml, the SLO rules
def test_prometheusrule_is_well_formed_and_passes_promtool(
    rendered: tuple[str, list[dict[str, Any]]], tmp_path: Path, name: str
) -> None:
    _, resources = rendered
    rule = _one(resources, "PrometheusRule", name)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["name"]
    groups = rule["spec"]["groups"]
    assert groups, "the PrometheusRule has no groups"
    for group in groups:
        assert set(group) <= GROUP_FIELDS, group
        assert group["rules"], f"group {group['name']} has no rules"
        for item in group["rules"]:
            assert set(item) <= RULE_FIELDS, item
            assert ("alert" in item) != ("record" in item), item
            assert item["expr"], item
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
    result = subprocess.run(
        [prometheus_binary("promtool"), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheusrule_is_generated_from_the_current_alerts() -> None:
    script = ROOT / "scripts" / "build_prometheusrule.py"
    result = subprocess.run(
        [sys.executable, str(script), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    generated = _load(KUSTOMIZATIONS["base"] / "prometheusrule.yaml")
    assert generated["spec"]["groups"] == _load(DEPLOY / "prometheus" / "alerts.yml")["groups"]


def test_configmap_config_validates_where_the_pod_mounts_it(
    rendered: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, resources = rendered
    config_map = _one(resources, "ConfigMap")
    mounted = [
        path
        for path, volume in _mounts(resources).items()
        if volume.get("configMap", {}).get("name") == config_map["metadata"]["name"]
    ]
    assert mounted == [_config_in_image().parent], "mount the ConfigMap where the image reads it"
    directory = tmp_path / mounted[0].relative_to("/")
    directory.mkdir(parents=True)
    for key, text in config_map["data"].items():
        (directory / key).write_text(text, encoding="utf-8")
    output = _validate(directory / _config_in_image().name, _env(resources))
    assert "0 suites" not in output


def test_probes_ask_the_daemons_health_endpoints(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, resources = rendered
    container = _container(resources)
    routes = {getattr(r, "path", None) for r in create_app(cast(Any, None)).routes}
    paths = {
        probe: container[probe]["httpGet"]["path"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    # Liveness must not depend on storage: a database outage would restart the pod in a loop.
    assert paths == {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    assert set(paths.values()) <= routes
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    listen = _port(_config(resources)["listen"])
    for probe in paths:
        assert ports[container[probe]["httpGet"]["port"]] == listen, probe


def test_the_pod_answers_its_probes_scrapes_and_service_names_but_no_other_host(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    """Probes and the ServiceMonitor reach the pod by its IP, clients by the Service's DNS
    names; a name of another site is refused (DNS rebinding)."""
    _, resources = rendered
    rule = HostRule.of(Config.model_validate(_config(resources)))
    pod_ip = "10.244.1.7"
    container = _container(resources)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "httpHeaders" not in container[probe]["httpGet"], "the kubelet sends the pod IP"
    assert rule.accepts(pod_ip, pod_ip)
    (endpoint,) = _one(resources, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["path"] in OPEN_PATHS
    service = _one(resources, "Service")["metadata"]["name"]
    for name in (service, f"{service}.monitoring.svc", f"{service}.monitoring.svc.cluster.local"):
        assert rule.accepts(name, pod_ip), name
    assert not rule.accepts("rebind.attacker.example", pod_ip)
    assert not rule.accepts("10.244.1.8", pod_ip)


def test_pod_runs_non_root_on_a_read_only_root_filesystem(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, resources = rendered
    pod = _one(resources, "Deployment")["spec"]["template"]["spec"]
    container = _container(resources)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _image_uid()
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    resources_ = container["resources"]
    assert {"cpu", "memory"} <= set(resources_["requests"])
    assert "memory" in resources_["limits"]
    assert "emptyDir" in _mounts(resources)[PurePosixPath("/tmp")]


def _pod_labels(resources: list[dict[str, Any]]) -> dict[str, str]:
    labels = _one(resources, "Deployment")["spec"]["template"]["metadata"]["labels"]
    return cast(dict[str, str], labels)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector of matchLabels only (what these manifests use) picks ``labels``."""
    assert set(selector) == {"matchLabels"}, f"only matchLabels is checked here: {selector}"
    return bool(selector["matchLabels"]) and selector["matchLabels"].items() <= labels.items()


def test_base_keeps_sqlite_on_its_volume_claim() -> None:
    """One process per SQLite file: one replica, and Recreate so a rollout never runs two."""
    resources = _render("base")
    volume = _mounts(resources)[_storage_dir(_storage(resources))]
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert _one(resources, "PersistentVolumeClaim", claim)
    spec = _one(resources, "Deployment")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    assert not [r for r in resources if r["kind"] == "PodDisruptionBudget"]


def test_postgres_overlay_stores_in_postgresql_without_a_volume_claim() -> None:
    resources = _render("postgres")
    assert _storage(resources).startswith("postgresql+psycopg://")
    assert not [r for r in resources if r["kind"] == "PersistentVolumeClaim"]
    assert not [v for v in _mounts(resources).values() if "persistentVolumeClaim" in v]


def test_postgres_overlay_keeps_the_spool_directory_writable() -> None:
    """At SIGTERM the runs waiting for PostgreSQL go to a spool file in $RAGCANARY_SPOOL_DIR,
    else the working directory: on a read-only root filesystem that must be a volume."""
    resources = _render("postgres")
    spool_dir = PurePosixPath(_env(resources).get("RAGCANARY_SPOOL_DIR") or _final("WORKDIR").args)
    volume = _mounts(resources)[spool_dir]
    assert "emptyDir" in volume, volume


def test_postgres_overlay_runs_three_replicas_rolled_one_at_a_time() -> None:
    deployment = _one(_render("postgres"), "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1},
    }


def test_postgres_overlay_disruption_budget_keeps_two_replicas_of_these_pods() -> None:
    resources = _render("postgres")
    budget = _one(resources, "PodDisruptionBudget")
    assert budget["apiVersion"] == "policy/v1"
    deployment = _one(resources, "Deployment")
    assert _selects(budget["spec"]["selector"], _pod_labels(resources))
    # The budget counts exactly the Deployment's pods: its selector is the Deployment's own.
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    replicas, spec = deployment["spec"]["replicas"], budget["spec"]
    assert ("minAvailable" in spec) != ("maxUnavailable" in spec), spec
    kept = spec["minAvailable"] if "minAvailable" in spec else replicas - spec["maxUnavailable"]
    assert kept == 2, f"a drain should keep 2 of {replicas} replicas, keeps {kept}"
    assert spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"


def test_postgres_overlay_prefers_replicas_on_different_nodes() -> None:
    """Preferred, not required: with fewer nodes than replicas the pods still schedule."""
    resources = _render("postgres")
    affinity = _one(resources, "Deployment")["spec"]["template"]["spec"]["affinity"]
    anti = affinity["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti
    (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert _selects(term["labelSelector"], _pod_labels(resources))
    assert 1 <= preferred["weight"] <= 100


@pytest.mark.slow
def test_production_install_has_no_demo_dependencies_and_runs(
    production_venv: Path, tmp_path: Path
) -> None:
    """Without extras: no bm25s or numpy, `run` gates a live retriever, `demo` names the extra.

    20-40 s: a wheel build and a virtualenv with the core dependencies.
    """
    python = str(production_venv / "python")
    for package in ("bm25s", "numpy"):
        missing = subprocess.run(
            [python, "-c", f"import importlib.metadata as m; m.version({package!r})"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert missing.returncode != 0, f"the production install pulled in the demo's {package}"
    ragcanary = str(production_venv / "ragcanary")
    with FakeRetriever() as retriever:
        config = tmp_path / "ragcanary.yaml"
        suite = tmp_path / "suite.yaml"
        suite.write_text(
            yaml.safe_dump(
                {"cases": [{"id": "reset", "query": "reset password", "relevant": ["doc-7"]}]}
            ),
            encoding="utf-8",
        )
        config.write_text(
            yaml.safe_dump(
                {
                    "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
                    "targets": {"vendor": target_entry(retriever.url)},
                    "suites": {"core": {"cases": "suite.yaml", "targets": ["vendor"], "k": [1, 5]}},
                }
            ),
            encoding="utf-8",
        )
        env = {**os.environ, "VENDOR_KEY": DEFAULT_API_KEY}
        ran = subprocess.run(
            [ragcanary, "run", "-c", str(config), "--report", str(tmp_path / "report.json")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["metrics"]["hit_rate@1"] == 1.0
    demo = subprocess.run(
        [ragcanary, "demo", "--once", "--workdir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert "pip install 'ragcanary[demo]'" in demo.stderr
