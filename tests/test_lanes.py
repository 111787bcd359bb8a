"""The lanes: tests that start servers are marked e2e unasked, others that do fail, none is lost."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS.parent / "scripts" / "check_lanes.py"

# A small suite run by its own pytest with tests/lanes.py: what lands where, and why.
CONFTEST = """
import pytest

pytest_plugins = ("lanes",)


@pytest.fixture
def postgres_url():
    return "postgresql+psycopg://stands-in-for-conftest/test"
"""

SUITE = """
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from retrievers import FakeRetriever


@pytest.fixture
def retriever():
    with FakeRetriever() as fake:
        yield fake


def _served():
    return FakeRetriever()


def test_pure():
    assert sum([1, 2]) == 3


def test_serves_a_retriever():
    with FakeRetriever() as fake:
        assert fake.url


def test_uses_a_fixture_that_serves(retriever):
    assert retriever.url


def test_serves_through_a_helper_of_its_module():
    with _served() as fake:
        assert fake.url


def test_on_postgres(postgres_url):
    assert postgres_url


@pytest.mark.e2e
def test_marked_by_hand():
    assert True


def test_binds_through_a_library_the_scan_does_not_know():
    HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler).server_close()


def test_starts_a_process_through_os():
    os.system("true")


def test_asks_for_postgres_by_name(request):
    request.getfixturevalue("postgres_url")


def test_swallows_what_the_guard_raised():
    try:
        HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler).server_close()
    except Exception:
        pass
"""

E2E = [
    "test_serves_a_retriever",
    "test_uses_a_fixture_that_serves",
    "test_serves_through_a_helper_of_its_module",
    "test_on_postgres",
    "test_marked_by_hand",
]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(f"[pytest]\npythonpath = {TESTS}\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.e2e  # runs pytest in a process of its own
def test_tests_that_start_servers_are_in_the_e2e_lane_unmarked(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--collect-only", "-q", "-m", "e2e")
    collected = [line.split("::")[1] for line in result.outlines if "::" in line]
    assert sorted(collected) == sorted(E2E)


@pytest.mark.e2e  # runs pytest in a process of its own
def test_the_e2e_lane_runs_its_servers(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-m", "e2e")
    result.assert_outcomes(passed=len(E2E), deselected=5)


@pytest.mark.e2e  # runs pytest in a process of its own
def test_a_unit_test_that_binds_spawns_or_asks_for_postgres_fails_saying_what(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest_subprocess("-m", "not e2e")
    result.assert_outcomes(passed=1, failed=4, deselected=len(E2E))
    result.stdout.fnmatch_lines_random(
        [
            "*test_binds_through_a_library_the_scan_does_not_know is in the unit lane*"
            "bound a socket to ('127.0.0.1', 0)*Mark it end-to-end*",
            "*test_starts_a_process_through_os is in the unit lane*started a process*os.system*",
            "*test_asks_for_postgres_by_name is in the unit lane*"
            "set up the server fixture postgres_url*",
            "*test_swallows_what_the_guard_raised is in the unit lane*bound a socket*",
        ]
    )


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_lanes", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("unit", "e2e", "expected"),
    [
        (["a", "b"], ["c"], []),
        (["a"], ["c"], ["in neither lane: b"]),
        (["a", "b"], ["b", "c"], ["in both lanes: b"]),
        (["a", "b"], ["c", "d"], ["not in the whole suite: d"]),
        (["a", "b", "b"], ["c"], ["collected twice in the unit lane: b"]),
    ],
)
def test_the_lanes_check_names_each_test_lost_or_run_twice(
    unit: list[str], e2e: list[str], expected: list[str]
) -> None:
    assert _script().problems(["a", "b", "c"], unit, e2e) == expected
