"""Loading ragcanary.yaml: every mistake located with a fix, ${VAR}, env overrides, suites."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragcanary.config.model import Config, Thresholds
from ragcanary.config.units import DURATION_HINT, RATE_HINT
from ragcanary.errors import ConfigError, Problem
from ragcanary.suites.loaded import config_path, load_config

SUITE = "cases:\n  - {id: a, query: how do I reset my password, relevant: [x]}\n"
VALID = """\
storage: sqlite:///ragcanary.db
listen: 127.0.0.1:9464
targets:
  docs-search:
    url: http://127.0.0.1:8088/search
    headers: {Authorization: "Bearer ${DOCS_TOKEN}"}
    body: {q: "{query}", limit: "{k}"}
    timeout: 5s
    rate_limit: 20/s
suites:
  core:
    cases: suites/core.yaml
    targets: [docs-search]
    every: 5m
    k: [1, 3, 5, 10]
    depth: 10
    thresholds:
      hit_rate: {5: 0.8}
      mrr: 0.5
"""
ENV = {"DOCS_TOKEN": "s3cret-token"}


def write(tmp_path: Path, text: str = VALID, suite: str = SUITE) -> Path:
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "core.yaml").write_text(suite, encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path, environ: dict[str, str] | None = None) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, ENV if environ is None else environ)
    return caught.value.problems


def test_contract_config_loads_with_its_suite(tmp_path: Path) -> None:
    """A README-like config validates, expands ${VAR} and loads its suite beside the config."""
    path = write(tmp_path)
    loaded = load_config(path, ENV)
    target = loaded.config.targets["docs-search"]
    suite = loaded.config.suites["core"]
    assert loaded.path == path
    assert target.headers == {"Authorization": "Bearer s3cret-token"}
    assert (target.timeout, target.rate_limit) == (5.0, 20.0)
    assert (suite.every, suite.cron, suite.k, suite.depth) == (300.0, None, [1, 3, 5, 10], 10)
    assert [c.id for c in loaded.suites["core"].cases] == ["a"]
    assert loaded.suites["core"].source == tmp_path / "suites" / "core.yaml"
    assert loaded.secrets == {"s3cret-token", "Bearer s3cret-token"}


def test_schedule_defaults_to_every_five_minutes(tmp_path: Path) -> None:
    """Neither every nor cron means every 5m; cron alone leaves every unset."""
    every = load_config(write(tmp_path, VALID.replace("    every: 5m\n", "")), ENV)
    cron = load_config(write(tmp_path, VALID.replace("every: 5m", "cron: '*/5 * * * *'")), ENV)
    assert every.config.suites["core"].every == 300.0
    assert (cron.config.suites["core"].every, cron.config.suites["core"].cron) == (
        None,
        "*/5 * * * *",
    )


MISTAKES = [
    # (text in VALID, replacement, path, line, text the fix must contain)
    ("every: 5m", "every: 5 minutes", "suites.core.every", 14, DURATION_HINT),
    ("every: 5m", "evry: 5m", "suites.core.evry", 14, "did you mean 'every'?"),
    ("every: 5m", "every: 5m\n    cron: '0 * * * *'", "suites.core.cron", 15, "keep only one"),
    ("every: 5m", "cron: '61 * * * *'", "suites.core.cron", 14, "five fields"),
    ("every: 5m", "cron: '0 0 30 2 *'", "suites.core.cron", 14, "five fields"),
    ("every: 5m", "every: 1ms", "suites.core.every", 14, "at least 1s"),
    ("every: 5m", "every: 999ms", "suites.core.every", 14, "at least 1s"),
    ("every: 5m", "every: 0.5", "suites.core.every", 14, "at least 1s"),
    ("every: 5m", "every: 999999999w", "suites.core.every", 14, "3650d or less"),
    ("every: 5m", f"every: {'9' * 400}", "suites.core.every", 14, "3650d or less"),
    ("timeout: 5s", "timeout: 99999999d", "targets.docs-search.timeout", 8, "3650d or less"),
    ("k: [1, 3, 5, 10]", "k: [1, 3, 5, 5, 10]", "suites.core.k[3]", 15, "each cut-off once"),
    ("k: [1, 3, 5, 10]", "k: []", "suites.core.k", 15, "like [1, 5, 10]"),
    ("k: [1, 3, 5, 10]", "k: [1, -3]", "suites.core.k[1]", 15, "1 or more"),
    ("k: [1, 3, 5, 10]", "k: [1, x]", "suites.core.k[1]", 15, "write a whole number"),
    ("depth: 10", "depth: 5", "suites.core.depth", 16, "set depth: 10 or more"),
    ("depth: 10", "depth: 10\n    baseline: latest", "suites.core.baseline", 17, "'pinned' or"),
    ("depth: 10", "depth: 10\n    min_coverage: 2", "suites.core.min_coverage", 17, "or less"),
    ("[docs-search]", "[docs-serch]", "suites.core.targets[0]", 13, "did you mean 'docs-search'?"),
    ("targets: [docs-search]", "targets: []", "suites.core.targets", 13, "[docs-search]"),
    ("cases: suites/core.yaml", "cases: suites/no.yaml", "suites.core.cases", 12, "relative"),
    ("    cases: suites/core.yaml\n", "", "suites.core.cases", 11, "add cases: suites/"),
    ("{5: 0.8}", "{5: 1.8}", "suites.core.thresholds.hit_rate.5", 18, "or less"),
    ("{5: 0.8}", "{0: 0.8}", "suites.core.thresholds.hit_rate.0", 18, "above 0"),
    ("{5: 0.8}", "{20: 0.8}", "suites.core.thresholds.hit_rate.20", 18, "add 20 to k"),
    ("hit_rate:", "hit_rat:", "suites.core.thresholds.hit_rat", 18, "did you mean 'hit_rate'?"),
    ("mrr: 0.5", "mrr: high", "suites.core.thresholds.mrr", 19, "write a number"),
    ("storage: sqlite:///ragcanary.db", "storage: mysql://db", "storage", 1, "postgresql+psycopg"),
    ("listen: 127.0.0.1:9464", "listen: 9464", "listen", 2, "127.0.0.1:9464"),
    ("listen: 127.0.0.1:9464", "listn: 127.0.0.1:9464", "listn", 2, "did you mean 'listen'?"),
    ("listen: 127.0.0.1:9464", "log_level: loud", "log_level", 2, "debug, info"),
    ("url: http://127.0.0.1", "url: ftp://127.0.0.1", "targets.docs-search.url", 5, "http://"),
    ("    url: http://127.0.0.1:8088/search\n", "", "targets.docs-search.url", 4, "add url: http"),
    ("url: http://127.0.0.1:8088", "url: ${BASE}", "targets.docs-search.url", 5, "export BASE"),
    ("${DOCS_TOKEN}", "${DOCS-TOKEN}", "targets.docs-search.headers.Authorization", 6, "$${"),
    (
        '{Authorization: "Bearer ${DOCS_TOKEN}"}',
        "{X-V: 2}",
        "targets.docs-search.headers.X-V",
        6,
        "text",
    ),
    ('{q: "{query}", limit: "{k}"}', "{limit: 3}", "targets.docs-search", 4, '{q: "{query}"}'),
    ("timeout: 5s", "timeout: soon", "targets.docs-search.timeout", 8, DURATION_HINT),
    ("timeout: 5s", "timeout: 0s", "targets.docs-search.timeout", 8, DURATION_HINT),
    ("timeout: 5s", "id: meta.[doc", "targets.docs-search.id", 8, "write a path like"),
    ("timeout: 5s", "method: PUT", "targets.docs-search.method", 8, "'GET' or 'POST'"),
    ("timeout: 5s", "concurrency: 0", "targets.docs-search.concurrency", 8, "1 or more"),
    ("timeout: 5s", "retries: many", "targets.docs-search.retries", 8, "whole number"),
    ("timeout: 5s", "verify_tls: maybe", "targets.docs-search.verify_tls", 8, "true or false"),
    ("rate_limit: 20/s", "rate_limit: 20 a second", "targets.docs-search.rate_limit", 9, RATE_HINT),
    (
        "listen: 127.0.0.1:9464",
        "forwarded_allow_ips: [10.0.0.0/8, ingress.local]",
        "forwarded_allow_ips",
        2,
        "networks (10.0.0.0/8",
    ),
    (
        "listen: 127.0.0.1:9464",
        "forwarded_allow_ips: '127.0.0.1, 10.0.0.300'",
        "forwarded_allow_ips",
        2,
        "or * to believe every peer",
    ),
]


@pytest.mark.parametrize(("old", "new", "path", "line", "fix"), MISTAKES)
def test_each_mistake_is_one_located_problem_with_a_fix(
    tmp_path: Path, old: str, new: str, path: str, line: int, fix: str
) -> None:
    """Every kind of config mistake is reported once, at its dotted path and line, with a fix."""
    assert old in VALID
    [problem] = problems_of(write(tmp_path, VALID.replace(old, new, 1)))
    assert (problem.file, problem.path, problem.line) == (
        str(tmp_path / "ragcanary.yaml"),
        path,
        line,
    )
    assert fix in problem.fix


def test_problem_reads_like_the_style_guide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendered, a problem names path, value, file and line, then says what to write."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, VALID.replace("every: 5m", "every: 5 minutes"))
    [problem] = problems_of(Path("ragcanary.yaml"))
    assert str(problem) == (
        "suites.core.every: '5 minutes' is not a duration (ragcanary.yaml line 14); "
        "write it like 500ms, 30s, 5m, 1h or 30d."
    )


def test_five_mistakes_are_five_problems_in_line_order(tmp_path: Path) -> None:
    """validate can print every problem at once: none hides another."""
    text = VALID
    for old, new in [
        ("listen: 127.0.0.1:9464", "listen: nowhere"),
        ("timeout: 5s", "timeout: 5 minutes"),
        ("[docs-search]", "[docs-serch]"),
        ("every: 5m", "evry: 5m"),
        ("{5: 0.8}", "{5: 1.8}"),
    ]:
        text = text.replace(old, new)
    found = problems_of(write(tmp_path, text))
    assert [(p.path, p.line) for p in found] == [
        ("listen", 2),
        ("targets.docs-search.timeout", 8),
        ("suites.core.targets[0]", 13),
        ("suites.core.evry", 14),
        ("suites.core.thresholds.hit_rate.5", 18),
    ]


def test_suite_file_problems_come_with_the_config_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken suite file is reported under its own name, after the config's own problems."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf", VALID.replace("depth: 10", "depth: 1"), suite="cases: []\n")
    found = problems_of(Path("conf/ragcanary.yaml"))
    assert [(p.file, p.path, p.line) for p in found] == [
        ("conf/ragcanary.yaml", "suites.core.depth", 16),
        ("conf/suites/core.yaml", "cases", 1),
    ]


def test_a_suite_file_shared_by_suites_is_loaded_and_reported_once(tmp_path: Path) -> None:
    """Two suites over one broken file give that file's problems once."""
    second = "  other:\n    cases: suites/core.yaml\n    targets: [docs-search]\n"
    found = problems_of(write(tmp_path, VALID + second, suite="cases:\n  - {id: a}\n"))
    assert [p.path for p in found] == ["cases[0].query"]


def test_shared_suite_file_loads_for_both_suites(tmp_path: Path) -> None:
    """Both suites get the same cases."""
    second = "  other:\n    cases: suites/core.yaml\n    targets: [docs-search]\n"
    loaded = load_config(write(tmp_path, VALID + second), ENV)
    assert loaded.suites["other"] is loaded.suites["core"]


def test_expansion_happens_after_parsing(tmp_path: Path) -> None:
    """A value with quotes, colons, newlines or # cannot change the YAML around it."""
    tricky = 'x" : y\n# z ${NOT_EXPANDED_AGAIN}'
    text = VALID.replace('limit: "{k}"', 'limit: "{k}", note: "${NOTE}"')
    loaded = load_config(write(tmp_path, text), {**ENV, "NOTE": tricky})
    assert loaded.config.targets["docs-search"].body["note"] == tricky


def test_double_dollar_is_a_literal_reference(tmp_path: Path) -> None:
    """``$${X}`` writes ``${X}`` and needs no variable X."""
    text = VALID.replace('limit: "{k}"', 'limit: "{k}", note: "$${HOME} and $$"')
    loaded = load_config(write(tmp_path, text), ENV)
    assert loaded.config.targets["docs-search"].body["note"] == "${HOME} and $$"


def test_unset_variable_names_variable_path_and_line(tmp_path: Path) -> None:
    """The problem says which variable, where, and to export it; no follow-on noise."""
    [problem] = problems_of(write(tmp_path), environ={})
    assert problem == Problem(
        str(tmp_path / "ragcanary.yaml"),
        "targets.docs-search.headers.Authorization",
        "${DOCS_TOKEN} is not set",
        "set it in the environment (export DOCS_TOKEN=...) or remove the reference",
        6,
    )


def test_secrets_never_show_in_problems(tmp_path: Path) -> None:
    """A ${VAR} value that fails validation is redacted from the message."""
    text = VALID.replace("timeout: 5s", "timeout: ${DOCS_TOKEN}")
    [problem] = problems_of(write(tmp_path, text))
    assert problem.path == "targets.docs-search.timeout"
    assert "s3cret" not in str(problem)
    assert "'***' is not a duration" in problem.message


def test_environment_overrides_top_level_settings(tmp_path: Path) -> None:
    """RAGCANARY_* beat the YAML; the admin token becomes a secret; RAGCANARY_CONFIG is no field."""
    environ = {
        **ENV,
        "RAGCANARY_STORAGE": "postgresql+psycopg://canary:pw@db/ragcanary",
        "RAGCANARY_LISTEN": "0.0.0.0:9000",
        "RAGCANARY_LOG_LEVEL": "DEBUG",
        "RAGCANARY_LOG_FORMAT": "json",
        "RAGCANARY_ADMIN_TOKEN": "admin-secret",
        "RAGCANARY_CONFIG": "elsewhere.yaml",
        "RAGCANARY_TARGETS": "ignored",
    }
    loaded = load_config(write(tmp_path), environ)
    config = loaded.config
    assert config.storage == "postgresql+psycopg://canary:pw@db/ragcanary"
    assert (config.listen, config.log_level, config.log_format) == ("0.0.0.0:9000", "debug", "json")
    assert config.admin_token == "admin-secret"
    assert {"admin-secret", "pw"} <= loaded.secrets


def test_an_override_s_name_is_read_in_any_case(tmp_path: Path) -> None:
    """``ragcanary_storage`` overrides as ``RAGCANARY_STORAGE`` does, as pydantic-settings reads."""
    loaded = load_config(write(tmp_path), {**ENV, "ragcanary_Storage": "sqlite:///other.db"})
    assert loaded.config.storage == "sqlite:///other.db"


_LOAD_AND_LIST_SETTINGS_MODULES = """
import json, os, sys
from pathlib import Path
from ragcanary.suites.loaded import load_config
loaded = load_config(Path(sys.argv[1]), os.environ)
print(json.dumps([loaded.config.storage, "pydantic_settings" in sys.modules]))
"""


@pytest.mark.parametrize(
    ("environ", "storage", "imported"),
    [
        ({}, "sqlite:///ragcanary.db", False),
        ({"RAGCANARY_STORAGE": "sqlite:///other.db"}, "sqlite:///other.db", True),
    ],
)
def test_pydantic_settings_is_imported_only_when_a_ragcanary_variable_is_set(
    tmp_path: Path, environ: dict[str, str], storage: str, imported: bool
) -> None:
    """pydantic-settings took 12-16 ms of the 300 ms before `ragcanary run`'s first query, and
    that command gates deploys: with no ``RAGCANARY_*`` variable there is nothing to read.

    A fresh interpreter, because this test process imported pydantic-settings long ago.
    """
    env = {
        **{k: v for k, v in os.environ.items() if not k.upper().startswith("RAGCANARY_")},
        **ENV,
        **environ,
    }
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_LIST_SETTINGS_MODULES, str(write(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout.strip() == f'["{storage}", {str(imported).lower()}]'


def test_empty_environment_value_does_not_override(tmp_path: Path) -> None:
    """``RAGCANARY_STORAGE=`` is treated as unset."""
    loaded = load_config(write(tmp_path), {**ENV, "RAGCANARY_STORAGE": ""})
    assert loaded.config.storage == "sqlite:///ragcanary.db"


def test_bad_environment_override_names_the_variable(tmp_path: Path) -> None:
    """A wrong override is located in the environment, not at a YAML line."""
    [problem] = problems_of(write(tmp_path), {**ENV, "RAGCANARY_LOG_FORMAT": "xml"})
    assert (problem.file, problem.path, problem.line) == (
        "environment variable RAGCANARY_LOG_FORMAT",
        "log_format",
        None,
    )
    assert problem.fix == "write 'json' or 'console'"


@pytest.mark.parametrize(
    ("option", "environ", "expected"),
    [
        (Path("a.yaml"), {"RAGCANARY_CONFIG": "b.yaml"}, Path("a.yaml")),
        (None, {"RAGCANARY_CONFIG": "b.yaml"}, Path("b.yaml")),
        (None, {"RAGCANARY_CONFIG": ""}, Path("ragcanary.yaml")),
        (None, {}, Path("ragcanary.yaml")),
    ],
)
def test_config_path_prefers_option_then_environment(
    option: Path | None, environ: dict[str, str], expected: Path
) -> None:
    """--config, else $RAGCANARY_CONFIG, else ./ragcanary.yaml."""
    assert config_path(option, environ) == expected


def test_missing_config_is_one_problem_with_the_fix(tmp_path: Path) -> None:
    """No file: say which and how to point at another."""
    path = tmp_path / "ragcanary.yaml"
    [problem] = problems_of(path)
    assert (problem.file, problem.message) == (str(path), "file not found")
    assert "--config" in problem.fix
    assert "RAGCANARY_CONFIG" in problem.fix


def test_yaml_syntax_error_is_one_problem_at_its_line(tmp_path: Path) -> None:
    """Broken YAML stops at one located problem."""
    [problem] = problems_of(write(tmp_path, VALID.replace("    every: 5m", "   every: 5m")))
    assert problem.line == 14
    assert problem.message.startswith("YAML syntax error")


@pytest.mark.parametrize("text", ["- a list\n", "just text\n"])
def test_config_that_is_not_a_mapping_is_a_problem(tmp_path: Path, text: str) -> None:
    """The top level must be settings."""
    [problem] = problems_of(write(tmp_path, text))
    assert problem.message == "the config is not a mapping of settings"


def test_empty_config_is_all_defaults(tmp_path: Path) -> None:
    """Every field has a default; an empty file validates with no targets or suites."""
    loaded = load_config(write(tmp_path, "# nothing yet\n"), {})
    assert loaded.config == Config()
    assert (loaded.suites, loaded.secrets) == ({}, frozenset())


def test_bare_sections_validate_as_empty(tmp_path: Path) -> None:
    """``targets:`` and ``suites:`` with nothing under them are allowed while drafting."""
    loaded = load_config(write(tmp_path, "targets:\nsuites:\n"), {})
    assert (loaded.config.targets, loaded.config.suites) == ({}, {})


@pytest.mark.parametrize(
    ("fields", "floors"),
    [
        ({}, {}),
        ({"hit_rate": {5: 0.8}, "mrr": 0.5}, {"hit_rate@5": 0.8, "mrr": 0.5}),
        (
            {
                "ndcg": {10: 0.7, 1: 0.4},
                "recall": {"5": 0.6},
                "precision": {3: 0.2},
                "map": {10: 0.3},
            },
            {"precision@3": 0.2, "recall@5": 0.6, "ndcg@1": 0.4, "ndcg@10": 0.7, "map@10": 0.3},
        ),
        (
            {"judged": {10: 0.5, 5: 0.6}, "bpref": 0.4, "mrr": 0.5},
            {"judged@5": 0.6, "judged@10": 0.5, "mrr": 0.5, "bpref": 0.4},
        ),
    ],
)
def test_floors_are_keyed_like_report_metrics(
    fields: dict[str, object], floors: dict[str, float]
) -> None:
    """Thresholds.floors() gives NAME@K, mrr and bpref, like the report's metric keys."""
    assert Thresholds.model_validate(fields).floors() == floors


def test_an_interval_of_one_second_is_the_shortest_allowed(tmp_path: Path) -> None:
    """``every: 1s`` loads; docs/config.md's limit is at least 1 s, so 1s itself is fine."""
    loaded = load_config(write(tmp_path, VALID.replace("every: 5m", "every: 1s")), ENV)
    assert loaded.config.suites["core"].every == 1.0


def test_every_floor_at_a_k_that_is_not_computed_is_reported_at_once(tmp_path: Path) -> None:
    """Floors were reported one at a time; now all of them come out in one pass."""
    text = VALID.replace("hit_rate: {5: 0.8}", "hit_rate: {7: 0.8, 5: 0.8}\n      ndcg: {20: 0.5}")
    found = problems_of(write(tmp_path, text))
    assert [(p.path, p.line) for p in found] == [
        ("suites.core.thresholds.hit_rate.7", 18),
        ("suites.core.thresholds.ndcg.20", 19),
    ]
    assert found[0].message == "hit_rate@7 is never computed: 7 is not in k"


def test_a_judged_floor_at_a_k_that_is_not_computed_is_located(tmp_path: Path) -> None:
    """judged floors are checked against k like every other metric@k."""
    found = problems_of(write(tmp_path, VALID.replace("hit_rate: {5: 0.8}", "judged: {20: 0.5}")))
    assert [(p.path, p.message) for p in found] == [
        ("suites.core.thresholds.judged.20", "judged@20 is never computed: 20 is not in k")
    ]


def test_unset_variable_in_a_whole_header_is_named_not_masked(tmp_path: Path) -> None:
    """A header that is only ``${FIXTURE_KEY}`` is no secret while unset: name the variable."""
    text = VALID.replace('Authorization: "Bearer ${DOCS_TOKEN}"', "X-Api-Key: '${FIXTURE_KEY}'")
    [problem] = problems_of(write(tmp_path, text), environ={})
    assert problem.message == "${FIXTURE_KEY} is not set"
    assert "export FIXTURE_KEY" in problem.fix
    assert "***" not in str(problem)


FOUR_PROBLEMS = (
    VALID.replace("    timeout: 5s\n", "    timeout: 5s\n    timeout: 6s\n")
    .replace("k: [1, 3, 5, 10]", "k: [1, 3, 5, 5, 10]")
    .replace("hit_rate: {5: 0.8}", "hit_rate: {7: 0.8}")
)
FOUR_SUITE = SUITE + "  - {id: b, query: q, relevant: [y], min_score: 0.9, max_score: 0.2}\n"


def test_four_independent_problems_are_four_problems(tmp_path: Path) -> None:
    """A duplicate key, a duplicate k, a floor at an absent k and min_score > max_score."""
    found = problems_of(write(tmp_path, FOUR_PROBLEMS, FOUR_SUITE))
    config, suite = str(tmp_path / "ragcanary.yaml"), str(tmp_path / "suites" / "core.yaml")
    assert [(p.file, p.path, p.line) for p in found] == [
        (config, "targets.docs-search.timeout", 9),
        (config, "suites.core.k[3]", 16),
        (config, "suites.core.thresholds.hit_rate.7", 19),
        (suite, "cases[1].min_score", 3),
    ]
    assert all(p.fix for p in found)


def _ragcanary(
    *args: str, cwd: Path, memory_bytes: int = 1_500_000_000
) -> subprocess.CompletedProcess[str]:
    """``python -m ragcanary ARGS`` as a user runs it, under an address-space limit."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
    return subprocess.run(
        [sys.executable, "-m", "ragcanary", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, **ENV},
        timeout=60,
        preexec_fn=limit_memory,
    )


def test_validate_prints_all_four_problems_and_exits_2(tmp_path: Path) -> None:
    """The CLI shows every problem with file, path, line and fix in one pass."""
    path = write(tmp_path, FOUR_PROBLEMS, FOUR_SUITE)
    result = _ragcanary("validate", "-c", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    output = result.stdout + result.stderr
    for expected in (
        "key 'timeout' appears twice (lines 8 and 9) (",
        "suites.core.k[3]: k lists 5 more than once (",
        "suites.core.thresholds.hit_rate.7: hit_rate@7 is never computed",
        "cases[1].min_score: min_score 0.9 is above max_score 0.2",
    ):
        assert expected in output, output


BOMB = "\n".join(
    [
        "storage: sqlite:///ragcanary.db",
        'lol0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)),
        "suites: *l9",
    ]
)


@pytest.mark.parametrize("make", ["alias bomb", "60 MB"])
def test_validate_refuses_a_bomb_or_a_huge_config_in_seconds(tmp_path: Path, make: str) -> None:
    """Under a 1.5 GB memory limit, validate refuses both quickly with a located problem."""
    path = tmp_path / "ragcanary.yaml"
    if make == "alias bomb":
        path.write_text(BOMB, encoding="utf-8")
        expected = "YAML anchor &l0 is not allowed (" + str(path) + " line 2); write the value out"
    else:
        with path.open("w", encoding="utf-8") as handle:
            line = "# " + "x" * 98 + "\n"
            handle.write("storage: sqlite:///ragcanary.db\n" + line * 600_000)
        expected = "the file is 60.6 MB; config and suite files may have at most 10 MB"
    started = time.monotonic()
    result = _ragcanary("validate", "-c", str(path), cwd=tmp_path)
    assert time.monotonic() - started < 10
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stdout + result.stderr


EMBEDDED = VALID.replace(
    "targets:\n",
    """embeddings:
  minilm:
    url: http://127.0.0.1:8080/v1/embeddings
    model: all-MiniLM-L6-v2
    headers: {Authorization: "Bearer ${EMBED_TOKEN}"}
targets:
""",
).replace(
    '    body: {q: "{query}", limit: "{k}"}\n',
    '    body: {vector: "{vector}", limit: "{k}"}\n    embedding: minilm\n',
)


def test_an_embedding_target_sends_its_vector_and_its_key_is_a_secret(tmp_path: Path) -> None:
    """A body with only {vector} is fine when an embedding makes it; its headers are redacted."""
    loaded = load_config(write(tmp_path, EMBEDDED), {**ENV, "EMBED_TOKEN": "emb-77"})
    assert loaded.config.targets["docs-search"].embedding == "minilm"
    assert loaded.config.embeddings["minilm"].batch == 64
    assert "Bearer emb-77" in loaded.secrets


def test_commands_reading_stored_runs_need_no_embedding_key(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, EMBEDDED), {}, query_targets=False)
    assert loaded.config.embeddings["minilm"].model == "all-MiniLM-L6-v2"


@pytest.mark.parametrize(
    ("change", "path", "message", "fix"),
    [
        pytest.param(
            ("embedding: minilm", "embedding: minilml"),
            "targets.docs-search.embedding",
            "unknown embedding 'minilml'",
            "minilm",
            id="unknown-name",
        ),
        pytest.param(
            ("    embedding: minilm\n", ""),
            "targets.docs-search",
            "{vector} is sent but no embedding makes one",
            "set embedding: NAME",
            id="vector-without-embedding",
        ),
        pytest.param(
            ("model: all-MiniLM-L6-v2", "model: ''"),
            "embeddings.minilm.model",
            "",
            "",
            id="empty-model",
        ),
    ],
)
def test_embedding_mistakes_are_located(
    tmp_path: Path, change: tuple[str, str], path: str, message: str, fix: str
) -> None:
    text = EMBEDDED.replace(*change)
    assert text != EMBEDDED
    [problem] = problems_of(write(tmp_path, text), {**ENV, "EMBED_TOKEN": "emb-77"})
    assert problem.path == path
    assert message in problem.message
    assert fix in problem.fix
    assert problem.line is not None


@pytest.mark.parametrize(
    ("line", "trusted"),
    [
        pytest.param("", [], id="nobody-by-default"),
        pytest.param(
            "forwarded_allow_ips: [10.0.0.0/8, '::1']\n", ["10.0.0.0/8", "::1"], id="list"
        ),
        pytest.param(
            "forwarded_allow_ips: '127.0.0.1, fd00::/8'\n", ["127.0.0.1", "fd00::/8"], id="string"
        ),
        pytest.param("forwarded_allow_ips: '*'\n", ["*"], id="everyone"),
    ],
)
def test_forwarded_headers_are_believed_only_from_the_listed_proxies(
    tmp_path: Path, line: str, trusted: list[str]
) -> None:
    """As uvicorn's --forwarded-allow-ips: a list or a comma-separated string; none by default."""
    loaded = load_config(write(tmp_path, line + VALID), ENV)
    assert loaded.config.forwarded_allow_ips == trusted
