"""schemathesis against a running `ragcanary serve`: no operation of /openapi.json answers 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
import yaml
from daemon_harness import DaemonProcess, free_port, running
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from retrievers import CORPUS, DEFAULT_API_KEY, FakeRetriever, target_entry
from schemathesis import APIOperation, GenerationMode

ADMIN_TOKEN = "adm-fuzz-61b0c4e2"
RUNS_S = 60.0
EXAMPLES = 8  # per operation, mode and token: 4 x 8 requests each


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """`ragcanary serve` with an admin token against a FakeRetriever, after two stored runs."""
    directory = tmp_path_factory.mktemp("openapi")
    cases = [
        {"id": f"case-{i}", "query": query, "relevant": [hits[0][0]] if hits else []}
        | ({} if hits else {"max_score": 0.5})
        for i, (query, hits) in enumerate(CORPUS.items())
    ]
    (directory / "core.yaml").write_text(yaml.safe_dump({"cases": cases}), encoding="utf-8")
    port = free_port()
    with FakeRetriever() as retriever:
        config = {
            "storage": f"sqlite:///{directory / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{port}",
            "targets": {"vendor": target_entry(retriever.url, timeout="5s", retries=0)},
            "suites": {"core": {"cases": "core.yaml", "targets": ["vendor"], "every": "1s"}},
        }
        path = directory / "ragcanary.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        env = {"VENDOR_KEY": DEFAULT_API_KEY, "RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN}
        with running(DaemonProcess(path, port, env)) as process:
            process.wait_runs("core", "vendor", 2, RUNS_S)
            yield process
            assert process.process.poll() is None, process.log


def fuzz(operation: APIOperation, mode: GenerationMode, base_url: str, token: str | None) -> None:
    """Hypothesis over one operation's generated requests, each checked by schemathesis."""
    headers = {"Authorization": f"Bearer {token}"} if token else None

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests every run: a failure here is reproducible
        suppress_health_check=list(HealthCheck),  # negative data is mostly filtered out
    )
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, headers=headers, timeout=10)

    try:
        check()
    except Unsatisfiable:
        # Nothing to get wrong in an operation without parameters or body (e.g. /healthz).
        assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request generated"


def test_no_operation_answers_a_server_error_or_off_schema(daemon: DaemonProcess) -> None:
    """Valid and invalid input to every operation, with and without the admin token."""
    schema = schemathesis.openapi.from_url(f"{daemon.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9, [op.label for op in operations]
    failures = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for token in (ADMIN_TOKEN, None):
                try:
                    fuzz(operation, mode, daemon.url, token)
                except (AssertionError, BaseExceptionGroup) as exc:  # try all, then fail
                    failures.append(f"{operation.label} {mode.value} token={bool(token)}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert daemon.process.poll() is None, daemon.log
