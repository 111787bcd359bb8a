"""Fuzzing ragcanary.yaml: any bytes, YAML-ish text or mutated config loads or fails located."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragcanary.errors import ConfigError
from ragcanary.probe.target import HttpTarget
from ragcanary.suites.loaded import LoadedConfig, load_config

SECRET = "hunter2-fuzz-7d1c"
ENV = {"DOCS_TOKEN": SECRET, "EMPTY": ""}
SUITE = "cases:\n  - {id: a, query: how do I reset my password, relevant: [x]}\n"
BASE: dict[str, Any] = {
    "storage": "sqlite:///ragcanary.db",
    "listen": "127.0.0.1:9464",
    "admin_token": "${DOCS_TOKEN}",
    "targets": {
        "docs-search": {
            "url": "http://user:${DOCS_TOKEN}@127.0.0.1:8088/search",
            "method": "POST",
            # Not Authorization: the URL's user:password is sent as that header.
            "headers": {"X-Api-Key": "Bearer ${DOCS_TOKEN}"},
            "body": {"q": "{query}", "limit": "{k}"},
            "params": {"debug": "1"},
            "results": "hits",
            "id": "metadata.doc_id",
            "score": "score",
            "timeout": "5s",
            "concurrency": 8,
            "rate_limit": "20/s",
            "retries": 1,
            "verify_tls": True,
        }
    },
    "suites": {
        "core": {
            "cases": "suites/core.yaml",
            "targets": ["docs-search"],
            "every": "5m",
            "k": [1, 3, 5, 10],
            "depth": 10,
            "baseline": "pinned",
            "min_coverage": 0.9,
            "thresholds": {
                "hit_rate": {5: 0.8},
                "mrr": 0.5,
                "max_drop": 0.02,
                "score_drift": 0.05,
                "min_rank_overlap": 0.7,
            },
        }
    },
}

# Values that sit near the edge of what some field accepts, or exercise ${VAR} and the loaders.
TRICKY = [
    "5m", "0s", "-1s", "1h30m", "5 minutes", "1e309", "20/s", "0/s", "600/m", "*/5 * * * *",
    "61 * * * *", "${DOCS_TOKEN}", "x${DOCS_TOKEN}y", "${UNSET_VAR}", "${EMPTY}", "${", "${1x}",
    "$${x}", "{query}", "{k}", "hits[", "a.[b", "`x`", "http://", "ftp://example.org",
    "http://u:${DOCS_TOKEN}@h/x", "http://[::1", "127.0.0.1:99999", "[::1]:80", ":80", "",
    " ", "GET", "get", "PUT", "pinned", "previous", "linear", "exponential", "json", "debug",
    "postgresql+psycopg://u:${DOCS_TOKEN}@db/x", "sqlite://", "suites/core.yaml",
    "suites/missing.yaml", "suites", "../", "docs-search", "nope",
    "a" * 60 + "${DOCS_TOKEN}",  # a secret past the length at which quoted values are cut
]  # fmt: skip
KEYS = sorted({"unknown", "hit_rate", "5", "docs-search", "core", *BASE, *BASE["suites"]["core"]})

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(TRICKY),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.integers(-1, 20) | st.text(max_size=6), inner)
    ),
    max_leaves=6,
)


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _paths(child, (*at, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _paths(child, (*at, index))


PATHS = [path for path in _paths(BASE) if path]


@st.composite
def mutated_configs(draw: st.DrawFn) -> Any:
    """BASE with one to three nodes replaced, removed, or given an extra key."""
    config = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = config
        for part in path[:-1]:
            if not isinstance(parent, dict | list) or part not in _keys(parent):
                break
            parent = parent[part]
        else:
            if isinstance(parent, dict | list) and path[-1] in _keys(parent):
                action = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
                if action == "replace":
                    parent[path[-1]] = draw(values)
                elif action == "remove":
                    del parent[path[-1]]
                elif isinstance(parent, dict):
                    parent[draw(st.sampled_from(KEYS))] = draw(values)
    return config


def _keys(node: dict[Any, Any] | list[Any]) -> range | Any:
    return node.keys() if isinstance(node, dict) else range(len(node))


yaml_ish = st.lists(
    st.sampled_from(
        [
            "\n", "  ", "- ", ": ", "#", "&a ", "*a", "<<: *a", "!!python/object:os.system", "!x ",
            "---", "...", "{", "}", "[", "]", ",", "'", '"', "\t", "%YAML 1.1", "? ", "|", ">",
            *KEYS, *TRICKY,
        ]
    )
    | st.text(max_size=4),
    max_size=40,
).map("".join)  # fmt: skip

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A directory with the suite file BASE names; each example rewrites its ragcanary.yaml."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "suites").mkdir()
        (root / "suites" / "core.yaml").write_text(SUITE, encoding="utf-8")
        yield root


def load(workdir: Path, content: bytes) -> LoadedConfig | ConfigError:
    """What load_config makes of ``content``; any exception but ConfigError fails the test."""
    path = workdir / "ragcanary.yaml"
    path.write_bytes(content)
    try:
        loaded = load_config(path, ENV)
    except ConfigError as exc:
        assert_located(exc, str(path))
        return exc
    assert set(loaded.suites) == set(loaded.config.suites)
    for suite in loaded.config.suites.values():
        assert set(suite.targets) <= set(loaded.config.targets)
    # A config that loads can build every target: its response paths compile.
    for name, target in loaded.config.targets.items():
        HttpTarget(name, target, httpx.AsyncClient(transport=httpx.MockTransport(_unused)))
    return loaded


def _unused(request: httpx.Request) -> httpx.Response:
    raise AssertionError("no request is sent while loading a config")


def assert_located(exc: ConfigError, config_file: str) -> None:
    """Every problem names its file, says what is wrong and what to do, and hides the secret."""
    assert exc.problems, "a ConfigError without problems"
    for problem in exc.problems:
        assert problem.file, problem
        assert problem.message, problem
        assert problem.fix, problem
        if problem.file == config_file and problem.path:
            assert problem.line is not None, f"{problem} has no line"
    assert SECRET not in str(exc)
    assert all(SECRET not in str(field) for p in exc.problems for field in vars(p).values())


@FUZZ
@given(content=st.binary(max_size=200))
def test_any_bytes_load_or_fail_located(workdir: Path, content: bytes) -> None:
    """Random bytes never escape as anything but a located ConfigError."""
    load(workdir, content)


@FUZZ
@given(text=yaml_ish)
def test_yaml_ish_text_loads_or_fails_located(workdir: Path, text: str) -> None:
    """Fragments of YAML syntax, config keys and edge values never crash the loader."""
    load(workdir, text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(config=mutated_configs(), as_json=st.booleans())
def test_mutated_config_loads_or_fails_located(workdir: Path, config: Any, as_json: bool) -> None:
    """The BASE config with values of wrong types, edge values or missing fields."""
    if as_json:
        text = json.dumps(config, indent=1, default=str)
    else:
        text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
    load(workdir, text.encode("utf-8", "surrogatepass"))


def test_the_unmutated_base_loads_and_its_secret_is_known(workdir: Path) -> None:
    """The fuzzers start from a valid config, so a mutation is what makes one fail."""
    loaded = load(workdir, yaml.safe_dump(BASE).encode())
    assert isinstance(loaded, LoadedConfig)
    assert SECRET in loaded.secrets
