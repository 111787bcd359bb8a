"""The two test lanes: `make unit` runs what starts nothing, `make e2e` the tests marked `e2e`.

A test is end-to-end when it starts a process, a server (a retriever on 127.0.0.1, a daemon,
Chromium, Prometheus, Chroma) or reaches one (PostgreSQL). It is marked `e2e` here, at
collection, when it or a fixture it uses calls one of the helpers that start them
(``STARTERS``, looked for in its code and in the code of its module's own helpers it calls)
or uses a server fixture (``SERVER_FIXTURES``); a module's ``pytestmark`` or a decorator may
mark it too. So a new test that uses ``FakeRetriever``, ``DaemonProcess``, ``subprocess`` or
the ``store`` fixture on PostgreSQL lands in `make e2e` without anyone writing a marker.

Whatever the marks say, a test outside the e2e lane that starts a process, binds a socket,
opens a TCP connection or sets up a server fixture fails, naming what it did: the audit hook
below (``sys.addaudithook``, the interpreter's own record of such calls) watches its setup and
its call. That is what keeps `make unit` fast and free of servers when a helper is new. It
sees Python's sockets and process calls, not a C library's own: psycopg's connections pass
unseen, which is why PostgreSQL is reached through the watched fixtures. See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import socket
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MARK = "e2e"

# Fixtures that reach a server the test does not start itself (conftest.py: PostgreSQL).
SERVER_FIXTURES = frozenset({"postgres_server", "postgres_url"})

# What starts a process or a server, as ``module.qualname``: a test that refers to one, or
# whose fixtures or own helpers do (a subclass counts), is e2e.
STARTERS = frozenset(
    {
        # Library modules that start processes or PostgreSQL, or open sockets.
        "multiprocessing",
        "pgserver",
        "pty",
        "socket",
        "subprocess",
        # The tests' helpers (tests/*.py).
        "browser_harness.chromium",
        "browser_harness.chromium_or_skip",
        "chroma_server.chroma_server",
        "daemon_harness.DaemonProcess",
        "daemon_harness.TcpProxy",
        "daemon_harness.free_port",
        "daemon_harness.packets_dropped",
        "daemon_harness.running",
        "faulty_retriever.FaultyRetriever",
        "forward_proxy.ForwardProxy",
        "listener.Listener",
        "prometheus_server.PrometheusServer",
        "prometheus_server.prometheus_binary",
        "reorder_proxy.ReorderProxy",
        "retrievers.EmbeddingServer",
        "retrievers.FakeRetriever",
        "retrievers.ServerThread",
        "server_process.ServerProcess",
        "server_process.free_port",
        "terminal.in_a_terminal",
        # ragcanary's own server: the demo retriever's.
        "ragcanary.demo.retriever.BackgroundServer",
    }
)

# Audit events (https://docs.python.org/3/library/audit_events.html) that start a process.
PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.system",
    }
)


_hooked = False  # an audit hook stays for the life of the interpreter: add it once


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARK}: starts a process or a server, or reaches one (tests/lanes.py); `make e2e`",
    )
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the item e2e by the fixtures and helpers it uses (before `-m` selects)."""
    if item.get_closest_marker(MARK) is None and _starts_servers(item):
        item.add_marker(MARK)


def _starts_servers(item: pytest.Item) -> str | None:
    """What makes ``item`` end-to-end: a server fixture or a starter it refers to, else None."""
    names = getattr(item, "fixturenames", ())
    used = SERVER_FIXTURES.intersection(names)
    if used:
        return f"fixture {sorted(used)[0]}"
    if not isinstance(item, pytest.Function):
        return None
    functions: list[Callable[..., Any]] = [item.obj]
    # The fixtures' own functions: the closure holds every fixture the test needs, however
    # deep. pytest has no public way to them; `_fixtureinfo` is what its own plugins read.
    info = getattr(item, "_fixtureinfo", None)
    for name in names if info is not None else ():
        functions.extend(fixturedef.func for fixturedef in info.name2fixturedefs.get(name, ()))
    for function in functions:
        found, _ = _starter_in(function, set(), set())
        if found:
            return found
    return None


# What each function scanned to the end refers to, by its code: tests share fixtures, helpers.
_FOUND: dict[types.CodeType, str | None] = {}


def _starter_in(
    function: Any, active: set[types.CodeType], visited: set[types.CodeType]
) -> tuple[str | None, bool]:
    """The first starter ``function`` refers to, directly or through its own module's helpers,
    and whether that is the whole answer: not when, before finding one, it came back to a
    function still being scanned further up (helpers that call each other)."""
    function = inspect.unwrap(function)
    inner = getattr(getattr(function, "hypothesis", None), "inner_test", None)
    if inner is not None:  # @given wraps the test
        function = inspect.unwrap(inner)
    code = getattr(function, "__code__", None)
    if code is None:
        return None, True
    if code in _FOUND:
        return _FOUND[code], True
    if code in visited:  # being scanned further up, or scanned short of a caller's answer
        return None, False
    visited.add(code)
    active.add(code)
    found, whole = _scan(code, getattr(function, "__globals__", {}), active, visited)
    active.discard(code)
    if found or whole:  # an answer that does not hang on a caller's: every test may reuse it
        _FOUND[code] = found
    return found, whole or bool(found)


def _scan(
    code: types.CodeType,
    namespace: dict[str, Any],
    active: set[types.CodeType],
    visited: set[types.CodeType],
) -> tuple[str | None, bool]:
    home = namespace.get("__name__")
    whole = True
    for name in _names(code):
        if name not in namespace:
            # `import pgserver` inside the function: the module is a name of the code only.
            if name in STARTERS and name in _imported(code):
                return name, True
            continue
        target = namespace[name]
        found = _as_starter(target)
        if found:
            return found, True
        if isinstance(target, types.ModuleType) or getattr(target, "__module__", None) != home:
            continue  # a library's or another module's: only the listed starters count
        for helper in _functions_of(target):
            found, complete = _starter_in(helper, active, visited)
            if found:
                return found, True
            whole = whole and complete
    return None, whole


def _names(code: types.CodeType) -> Iterator[str]:
    """Every global or attribute name ``code`` and its nested functions refer to."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _imported(code: types.CodeType) -> set[str]:
    """The modules ``code`` and its nested functions import themselves (``import x`` inside)."""
    found = {
        str(instruction.argval)
        for instruction in dis.get_instructions(code)
        if instruction.opname == "IMPORT_NAME"
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _imported(const)
    return found


def _as_starter(target: Any) -> str | None:
    """The starter ``target`` is (or a class of one, or a starter's subclass), else None."""
    if isinstance(target, types.ModuleType):
        names = [target.__name__]
    else:
        kinds = target.__mro__ if inspect.isclass(target) else (target,)
        names = [
            f"{getattr(kind, '__module__', None)}.{getattr(kind, '__qualname__', None)}"
            for kind in kinds
        ]
    for name in names:
        for starter in STARTERS:
            if name == starter or name.startswith(starter + "."):
                return starter
    return None


def _functions_of(target: Any) -> Iterator[Any]:
    """The code a module-level helper runs: a function, or the methods of a class."""
    if callable(target) and hasattr(target, "__wrapped__"):  # functools.cache, a decorator
        target = inspect.unwrap(target)
    if inspect.isfunction(target):
        yield target
    elif inspect.isclass(target):
        for member in vars(target).values():
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            if inspect.isfunction(member):
                yield member


# The guard ------------------------------------------------------------------------------------


class LaneViolation(RuntimeError):
    """A test outside the e2e lane started a process or reached a server."""


_watched: str | None = None  # the nodeid of the unit-lane test being set up or run
_violations: list[str] = []  # what it did that the unit lane does not allow


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watched is None:
        return
    if event in PROCESS_EVENTS:
        what = f"started a process ({event} {str(args[0])[:80]})"
    elif event == "socket.bind":
        what = f"bound a socket to {args[1]!r}"
    elif event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        what = f"opened a TCP connection to {args[1]!r}"
    else:
        return
    _violations.append(what)
    raise LaneViolation(f"{_watched} {what} in the unit lane (tests/lanes.py)")


def _message(nodeid: str, what: str) -> str:
    return (
        f"{nodeid} is in the unit lane (`make unit`: no processes, no servers) but it {what}. "
        f"Mark it end-to-end: `pytestmark = pytest.mark.{MARK}` in its module or "
        f"`@pytest.mark.{MARK}` on it; when a shared helper started it, add the helper to "
        "STARTERS in tests/lanes.py so that every test using it is marked."
    )


@contextlib.contextmanager
def _guard(item: pytest.Item) -> Iterator[None]:
    global _watched
    if item.get_closest_marker(MARK) is not None:
        yield
        return
    _watched = item.nodeid
    _violations.clear()
    try:
        yield
    finally:
        _watched = None
        if _violations:
            # Also when the test caught the LaneViolation (an `except Exception` around it).
            pytest.fail(_message(item.nodeid, _violations[0]), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guard(item):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> None:
    """A server fixture asked for by name (``request.getfixturevalue``) in the unit lane."""
    if _watched is not None and fixturedef.argname in SERVER_FIXTURES:
        what = f"set up the server fixture {fixturedef.argname}"
        _violations.append(what)
        raise LaneViolation(f"{_watched} {what} in the unit lane (tests/lanes.py)")
