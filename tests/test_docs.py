"""The reference in docs/ covers what the code has: metrics, report keys, routes, commands, alerts.

Each check reads the names from the running code (a daemon's registry, reports made by the
code paths of `ragcanary run` and `serve`, the FastAPI app, the typer app, the rules file),
never from a list typed here, and most also fail when a page names something that is gone.
Everything runs in process: targets and embedding endpoints answer through
``httpx.MockTransport``, storage is a SQLite file (and the local PostgreSQL for a replica).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator
from dataclasses import fields as dc_fields
from dataclasses import is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import typer.main
import yaml
from alert_contract import ALERTS
from prometheus_client import generate_latest

from ragcanary.cli.app import app as cli_app
from ragcanary.measure.diagnosis import CauseEvidence, Checked, Diagnosis
from ragcanary.measure.fingerprint import Fingerprint
from ragcanary.measure.lost_ids import AnnRecall, LostId
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import (
    BaselineComparison,
    CaseComparison,
    CaseEntry,
    ChangeVerdict,
    Counts,
    EndpointEntry,
    IndexLookup,
    Maintenance,
    RunClaim,
    RunReport,
    StaleLabelEntry,
    baseline_run,
    build_report,
)
from ragcanary.measure.verdict import Failure, Regression
from ragcanary.probe.embedding import Embedder
from ragcanary.probe.presets import make_target
from ragcanary.probe.runner import run_suite
from ragcanary.redact import Redactor
from ragcanary.reports.report import dump_text, load_reports
from ragcanary.serve.daemon import Claim, Daemon, JobKey, suite_pairs
from ragcanary.serve.http.api import create_app
from ragcanary.suites.judge import judge_run
from ragcanary.suites.loaded import LoadedConfig, load_config
from ragcanary.suites.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = ("cli.md", "config.md", "suites.md", "report.md", "metrics.md", "api.md", "alerts.md")


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def sections(text: str, heading: str) -> dict[str, str]:
    """The ``### `` sections of ``text`` whose title matches ``heading`` (one group: the name),
    each up to the next heading of any level."""
    found: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("#"):
            match = re.fullmatch(heading, line)
            name = match.group(1) if match else None
            if name is not None:
                found[name] = ""
        elif name is not None:
            found[name] += line + "\n"
    return found


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- runs made in process ------------------------------------------------------------------

# `ragcanary run`'s suite: every kind of case, tags, grades and a min_score.
CLI_SUITE = [
    {"id": "c0", "query": "q zero", "relevant": {"d0": 2, "x0": 1}, "tags": ["a"],
     "min_score": 0.1},
    {"id": "c1", "query": "q one", "relevant": ["d1"], "tags": ["b"]},
    {"id": "c2", "query": "q two", "relevant": ["d2"]},
    {"id": "neg", "query": "off topic", "relevant": [], "max_score": 0.9},
    {"id": "free", "query": "label free"},
]  # fmt: skip
CLI_CONFIG = """\
storage: sqlite:///{db}
embeddings:
  toy: {{url: "http://embedder.test/v1/embeddings", model: toy}}
targets:
  vectors: {{url: "http://vectors.test/search", body: {{vector: "{{vector}}", k: "{{k}}"}},
            embedding: toy}}
suites:
  core: {{cases: core.json, targets: [vectors], k: [1, 3], depth: 3}}
"""
QUERIES = [case["query"] for case in CLI_SUITE]


def _loaded(tmp_path: Path, config: str, cases: list[dict[str, Any]]) -> LoadedConfig:
    (tmp_path / "core.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(config, encoding="utf-8")
    return load_config(path, {})


def _vectors(lost: set[str]) -> httpx.MockTransport:
    """A vector retriever: the query vector's first number is the case's position."""

    def answer(request: httpx.Request) -> httpx.Response:
        i = int(json.loads(request.content)["vector"][0])
        hits = [
            {"id": f"d{i}", "score": 0.9},
            {"id": f"o{i}", "score": 0.5},
            {"id": "x0", "score": 0.4},
        ]
        return httpx.Response(200, json={"hits": [h for h in hits if h["id"] not in lost]})

    return httpx.MockTransport(answer)


def _embeddings(size: int, tilt: float) -> httpx.MockTransport:
    """An OpenAI-compatible embeddings endpoint of vectors of ``size`` numbers."""

    def answer(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [
            {"index": n, "embedding": [float(QUERIES.index(t)), 1.0, tilt] + [0.0] * (size - 3)}
            for n, t in enumerate(texts)
        ]
        return httpx.Response(200, json={"data": data})

    return httpx.MockTransport(answer)


async def _cli_run(
    loaded: LoadedConfig, baseline: Path | None, *, lost: set[str], size: int, tilt: float
) -> RunReport:
    """What `ragcanary run [--baseline FILE]` does for one pair (``cli.cycles.run_once``, then
    ``probe.cycle.run_cycle``), with the target's and the embedder's HTTP clients in process."""
    config = loaded.config.targets["vectors"]
    before = None
    if baseline is not None:
        [chosen] = load_reports(baseline)
        before = baseline_run(chosen, loaded.suites["core"])
    async with (
        httpx.AsyncClient(transport=_vectors(lost)) as client,
        httpx.AsyncClient(transport=_embeddings(size, tilt)) as embedding_client,
    ):
        target = make_target("vectors", config, client, Redactor(loaded.secrets))
        embedder = Embedder("toy", loaded.config.embeddings["toy"], embedding_client)
        run = await run_suite(
            "core", loaded.suites["core"], target, depth=3, concurrency=2, rate_limit=None,
            embed=embedder.embed,
        )  # fmt: skip
    return build_report(judge_run(loaded, "core", "vectors", run, before))


async def cli_reports(tmp_path: Path) -> list[RunReport]:
    """Reports of `ragcanary run`: a first run written with --report, then against it with
    --baseline a run that lost relevant ids, and one whose query vectors changed size."""
    loaded = _loaded(tmp_path, CLI_CONFIG.format(db=tmp_path / "cli.db"), CLI_SUITE)
    first = await _cli_run(loaded, None, lost=set(), size=3, tilt=0.0)
    written = tmp_path / "first.json"
    written.write_text(dump_text([first]), encoding="utf-8")
    lost = await _cli_run(loaded, written, lost={"d1", "d2"}, size=3, tilt=0.5)
    resized = await _cli_run(loaded, written, lost=set(), size=4, tilt=0.0)
    return [first, lost, resized]


# The daemon's suite on an Elasticsearch index (BM25), whose preset looks ids up with _mget, and
# a replica of it that answers alike.
DAEMON_SUITE = [
    {"id": "c0", "query": "q zero", "relevant": ["d0"]},
    {"id": "c1", "query": "q one", "relevant": ["d1"]},
]
DAEMON_CONFIG = """\
storage: {storage}
ui_url: http://ragcanary.test
runbook_base_url: http://wiki.test/runbooks
targets:
  search: {{preset: elasticsearch, url: "http://es.test:9200", collection: docs, text_field: body,
            endpoints: {{replica: "http://es-replica.test:9200"}}}}
suites:
  core: {{cases: core.json, targets: [search], every: 1m, k: [1, 3], depth: 3,
          per_case_metrics: true, stale_label_runs: 2, thresholds: {{hit_rate: {{1: 0.1}}}}}}
"""


def _index(held: set[str]) -> httpx.MockTransport:
    """An Elasticsearch index holding the ids in ``held`` (the set may change between runs)."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/_mget"):
            docs = [{"_id": i, "found": i in held} for i in body["ids"]]
            return httpx.Response(200, json={"docs": docs})
        doc = "d0" if "zero" in body["query"]["match"]["body"] else "d1"
        hits = [{"_id": d, "_score": s} for d, s in ((doc, 0.9), ("o", 0.5)) if d in held]
        return httpx.Response(200, json={"hits": {"hits": hits}})

    return httpx.MockTransport(answer)


async def daemon_run(tmp_path: Path, storage: str) -> tuple[list[RunReport], bytes]:
    """Two runs of a daemon that was never started (``run_now``), the first pinned as the
    baseline and, on PostgreSQL, made for a claimed tick; then the index loses d1; then a
    prune. Returns their reports and the exposition of the daemon's registry."""
    loaded = _loaded(tmp_path, DAEMON_CONFIG.format(storage=storage), DAEMON_SUITE)
    held = {"d0", "d1", "o"}
    daemon = Daemon(
        tmp_path / "ragcanary.yaml",
        {},
        loaded,
        client_factory=lambda _config: httpx.AsyncClient(transport=_index(held)),
    )
    try:
        daemon.store.migrate()
        # What the daemon's start does (``Daemon._export_config``).
        daemon.exporter.load(
            suite_pairs(loaded),
            config_hash="0123456789ab",
            ui_url=loaded.config.ui_url,
            runbook_url=loaded.config.runbook_base_url,
        )
        key = JobKey("core", "search")
        claim = None
        if daemon.replicas is not None:
            tick = datetime(2026, 1, 1, tzinfo=UTC)
            claim = Claim("core/search", tick, "f" * 32)
        first = await daemon.run_now(key, claim=claim)
        held.discard("d1")
        second = await daemon.run_now(key)
        await daemon.prune()  # the pruning job: it measures the store (ragcanary_storage_bytes)
        return [first, second], generate_latest(daemon.exporter.registry)
    finally:
        await daemon.shutdown()


# -- (a) metrics ---------------------------------------------------------------------------


def exposed(exposition: bytes) -> dict[str, str]:
    """Every metric name of an exposition, with its type, as its ``# TYPE`` lines say."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition.decode(), re.M))


def metric_names(text: str) -> set[str]:
    # Recording rules (ragcanary:...) are not metrics the code registers.
    return set(re.findall(r"(?<![\w:])ragcanary_\w+", text))


@pytest.mark.anyio
async def test_every_metric_a_daemon_registers_is_in_docs_metrics_md(tmp_path: Path) -> None:
    """Every family of a daemon's registry after two runs, ``_created`` series included."""
    _, exposition = await daemon_run(tmp_path, f"sqlite:///{tmp_path / 'daemon.db'}")
    registered = exposed(exposition)
    assert len(registered) > 40  # the pair's families are there, not only the process's
    missing = sorted(set(registered) - metric_names(page("metrics.md")))
    assert not missing, f"docs/metrics.md lacks {missing}"


@pytest.mark.anyio
async def test_every_metric_docs_metrics_md_names_is_registered(tmp_path: Path) -> None:
    """A name the page gives is a family of the registry, or a histogram's sample of one."""
    _, exposition = await daemon_run(tmp_path, f"sqlite:///{tmp_path / 'daemon.db'}")
    registered = exposed(exposition)
    samples = {
        f"{name}{suffix}"
        for name, kind in registered.items()
        if kind == "histogram"
        for suffix in ("_bucket", "_sum", "_count")
    }
    gone = sorted(metric_names(page("metrics.md")) - set(registered) - samples)
    assert not gone, f"docs/metrics.md names metrics the code no longer registers: {gone}"


# -- (b) the report JSON -------------------------------------------------------------------

# Objects whose keys are data (metric names, tags, query outcomes): docs/report.md shows each
# as one upper-case placeholder.
DATA_KEYS = {
    "metrics": "METRIC",
    "metrics_by_tag": "TAG",
    "metrics_by_tag.TAG": "METRIC",
    "baseline.deltas": "METRIC",
    "baseline.p_values": "METRIC",
    "baseline.ci": "METRIC",
    "baseline.win_tie_loss": "METRIC",
    "counts.outcomes": "OUTCOME",
    "cases[].metrics": "METRIC",
    "endpoints": "NAME",
    "endpoints.NAME.unanswered": "OUTCOME",
    "fingerprint.index_settings": "SETTING",
}


def key_paths(value: Any, path: str = "") -> Iterator[str]:
    """Every key of a report as docs/report.md names it: ``baseline.deltas.METRIC``,
    ``cases[].vs_baseline.rbo``."""
    if isinstance(value, dict):
        for key, item in value.items():
            name = DATA_KEYS.get(path, key)
            child = f"{path}.{name}" if path else name
            yield child
            yield from key_paths(item, child)
    elif isinstance(value, list):
        for item in value:
            yield from key_paths(item, f"{path}[]")


def undocumented(reports: list[RunReport]) -> list[str]:
    text = page("report.md")
    return sorted({p for r in reports for p in key_paths(marshal(r)) if f"`{p}`" not in text})


@pytest.mark.anyio
async def test_every_key_of_a_report_is_in_docs_report_md(tmp_path: Path) -> None:
    """Reports of `ragcanary run` (with and without --baseline, by vector) and of the daemon
    (stale labels, index lookups)."""
    (tmp_path / "cli").mkdir()
    (tmp_path / "daemon").mkdir()
    reports = await cli_reports(tmp_path / "cli")
    reports += (await daemon_run(tmp_path / "daemon", f"sqlite:///{tmp_path / 'd.db'}"))[0]
    walked = {p for r in reports for p in key_paths(marshal(r))}
    # The runs made every kind of key, so a key they stop making fails here, not silently.
    assert {
        "baseline.embedding_dimensions.current",
        "cases[].vs_baseline.left",
        "cases[].query_vector",
        "failures[].amount",
        "regressions[].metric",
        "metrics_by_tag.TAG.METRIC",
        "stale_labels[].looked_up_at",
        "index_lookup.left_at",
        "endpoints.NAME.rbo_min",
    } <= walked
    assert not undocumented(reports), f"docs/report.md lacks {undocumented(reports)}"
    outcomes = {o for r in reports for o in r.counts.outcomes}  # every query outcome
    unnamed = sorted(o for o in outcomes if f"`{o}`" not in page("report.md"))
    assert not unnamed, f"docs/report.md does not explain the query outcomes {unnamed}"


@pytest.mark.anyio
async def test_a_replica_s_report_keys_are_in_docs_report_md(
    tmp_path: Path, postgres_url: str
) -> None:
    """On PostgreSQL a run made for a claimed tick carries its ``claim``."""
    reports, _ = await daemon_run(tmp_path, postgres_url)
    assert "claim.replica" in set(key_paths(marshal(reports[0])))
    assert not undocumented(reports), f"docs/report.md lacks {undocumented(reports)}"


# The report's classes by where their fields sit in the JSON (``measure.report_json``).
REPORT_CLASSES: dict[str, type] = {
    "": RunReport,
    "baseline.": BaselineComparison,
    "failures[].": Failure,
    "regressions[].": Regression,
    "counts.": Counts,
    "cases[].": CaseEntry,
    "cases[].vs_baseline.": CaseComparison,
    "claim.": RunClaim,
    "maintenance.": Maintenance,
    "change.": ChangeVerdict,
    "change.diagnosis.": Diagnosis,
    "stale_labels[].": StaleLabelEntry,
    "index_lookup.": IndexLookup,
    "endpoints.NAME.": EndpointEntry,
    "diagnosis.": Diagnosis,
    "diagnosis.causes[].": CauseEvidence,
    "diagnosis.checked.": Checked,
    "diagnosis.ann_recall.": AnnRecall,
    "cases[].vs_baseline.lost[].": LostId,
    "fingerprint.": Fingerprint,
}


def test_every_field_of_the_report_classes_is_in_docs_report_md() -> None:
    """Read from the typed report itself: a field added to any of its classes fails here
    until docs/report.md explains its key (a field is written under its own name)."""
    text = page("report.md")
    fields = [f"{where}{f.name}" for where, cls in REPORT_CLASSES.items() for f in dc_fields(cls)]
    assert len(fields) > 60
    missing = sorted(f for f in fields if f"`{f}`" not in text)
    assert not missing, f"docs/report.md lacks {missing}"


def test_the_report_classes_nest_as_the_json_does() -> None:
    """Every dataclass a report field holds is listed above, so none goes unchecked."""
    nested = {
        t
        for cls in REPORT_CLASSES.values()
        for hint in typing.get_type_hints(cls).values()
        for t in _dataclasses_in(hint)
    }
    assert nested <= set(REPORT_CLASSES.values())


def _dataclasses_in(hint: Any) -> Iterator[type]:
    if is_dataclass(hint) and isinstance(hint, type):
        yield hint
    for arg in typing.get_args(hint):
        yield from _dataclasses_in(arg)


# -- (c) the HTTP API ----------------------------------------------------------------------

ROUTE_HEADING = r"### `([A-Z]+ /\S*)`"


def app_routes() -> set[str]:
    """``METHOD /path`` of every route of the app; a mounted folder as ``GET /path/…``."""
    routes = set()
    for route in create_app(cast(Any, None)).routes:
        methods = getattr(route, "methods", None)
        path = cast(str, getattr(route, "path"))  # noqa: B009  (every route has one)
        if methods is None:
            routes.add(f"GET {path}/…")
        routes.update(f"{method} {path}" for method in methods or () if method != "HEAD")
    return routes


def test_every_route_of_the_app_is_in_docs_api_md() -> None:
    documented = set(sections(page("api.md"), ROUTE_HEADING))
    missing = sorted(app_routes() - documented)
    assert not missing, f"docs/api.md has no section for {missing}"


def test_every_route_docs_api_md_describes_is_a_route_of_the_app() -> None:
    gone = sorted(set(sections(page("api.md"), ROUTE_HEADING)) - app_routes())
    assert not gone, f"docs/api.md describes routes the app does not have: {gone}"


# -- (d) the command line ------------------------------------------------------------------

COMMAND_HEADING = r"### `ragcanary ([a-z ]+)`"


def commands() -> dict[str, Any]:
    """Every command of the typer app by its words (``import beir``), groups walked."""
    found: dict[str, Any] = {}

    def walk(command: Any, words: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                if not sub.hidden:  # an alias (`changes` for `change`) is documented with it
                    walk(sub, (*words, name))
        else:
            found[" ".join(words)] = command

    walk(typer.main.get_command(cli_app), ())
    return found


def test_every_command_and_option_is_in_docs_cli_md() -> None:
    """Each command has a section naming each of its options and arguments."""
    text = page("cli.md")
    documented = sections(text, COMMAND_HEADING)
    missing = []
    for words, command in commands().items():
        section = documented.get(words)
        if section is None:
            missing.append(f"ragcanary {words}")
            continue
        for param in command.params:
            if param.param_type_name == "argument":
                names = [param.metavar or param.name.upper()]
                missing += [f"{words} {n}" for n in names if f"`{n}`" not in section]
            else:
                names = [*param.opts, *param.secondary_opts]
                missing += [
                    f"{words} {n}" for n in names if not re.search(f"`{re.escape(n)}[` ]", section)
                ]
    root = typer.main.get_command(cli_app)
    missing += [o for p in root.params for o in p.opts if f"`{o}`" not in text]
    assert not missing, f"docs/cli.md lacks {missing}"


def test_every_command_docs_cli_md_describes_exists() -> None:
    gone = sorted(set(sections(page("cli.md"), COMMAND_HEADING)) - set(commands()))
    assert not gone, f"docs/cli.md describes commands the CLI does not have: {gone}"


def test_docs_cli_md_gives_every_exit_code() -> None:
    table = page("cli.md").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `(\d+)` \|", table, re.M) == ["0", "1", "2", "3", "130"]


# -- (e) the alert rules -------------------------------------------------------------------

ALERT_HEADING = r"### (RagCanary\w+)"


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_every_alert_is_in_docs_alerts_md_with_its_severity() -> None:
    documented = sections(page("alerts.md"), ALERT_HEADING)
    wrong = []
    for rule in (r for r in rules() if "alert" in r):
        section = documented.get(rule["alert"], "")
        if f"Severity `{rule['labels']['severity']}`" not in section:
            wrong.append(f"{rule['alert']} ({rule['labels']['severity']})")
    assert not wrong, f"docs/alerts.md lacks or mislabels {wrong}"


def test_every_alert_docs_alerts_md_describes_is_a_rule() -> None:
    alerts = {r["alert"] for r in rules() if "alert" in r}
    gone = sorted(set(sections(page("alerts.md"), ALERT_HEADING)) - alerts)
    assert not gone, f"docs/alerts.md describes alerts the rules do not have: {gone}"


def test_every_recording_rule_is_in_docs_alerts_md() -> None:
    text = page("alerts.md")
    missing = [r["record"] for r in rules() if "record" in r and f"`{r['record']}`" not in text]
    assert not missing, f"docs/alerts.md lacks {missing}"


# -- the other pages -----------------------------------------------------------------------


def test_every_case_field_is_explained_in_docs_suites_md() -> None:
    """The case fields of docs/config.md (checked against the model) each have a paragraph."""
    config = page("config.md").split("## Suite file cases", 1)[1]
    fields = re.findall(r"^\| `(\w+)` \|", config, re.M)
    assert "relevant" in fields
    missing = [f for f in fields if f"**`{f}`**" not in page("suites.md")]
    assert not missing, f"docs/suites.md lacks {missing}"


def test_the_example_of_docs_suites_md_loads_with_every_kind_of_case(tmp_path: Path) -> None:
    example = page("suites.md").split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "suite.yaml"
    path.write_text(example, encoding="utf-8")
    kinds = {case.kind for case in load_suite(path).cases}
    assert kinds == {"labelled", "negative", "label_free"}


def test_readme_and_the_architecture_page_link_every_reference_page() -> None:
    readme, architecture = (ROOT / "README.md").read_text(encoding="utf-8"), page("architecture.md")
    missing = [f"README: {n}" for n in REFERENCE if f"](docs/{n}" not in readme]
    missing += [f"architecture.md: {n}" for n in REFERENCE if f"]({n}" not in architecture]
    assert not missing, missing


def test_links_between_the_pages_resolve() -> None:
    broken = []
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{path.name}: {target}")
    assert not broken, broken


def test_no_file_cites_a_design_document_outside_the_repository() -> None:
    """Code, tests, configs and pages cite docs/; the contract lives in the repository."""
    outside = re.compile(r"DESIGN\.md|\.\./shared/|/work/shared")
    places = ["src", "tests", "docs", "bench", "scripts", "deploy", "grafana", ".ci"]
    files = [ROOT / "pyproject.toml", ROOT / "Makefile", ROOT / "README.md"]
    files += [p for place in places for p in (ROOT / place).rglob("*") if p.is_file()]
    citing = []
    for path in files:
        built = any(part == "__pycache__" or part.endswith(".egg-info") for part in path.parts)
        if built or path == Path(__file__):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary data (the demo corpus, compiled files)
        if outside.search(text):
            citing.append(str(path.relative_to(ROOT)))
    assert not citing, f"these cite a document outside the repository: {citing}"
