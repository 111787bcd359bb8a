"""The interpreter's and the process's settings for a long-lived daemon, set once when `serve`
starts."""

from __future__ import annotations

import contextlib
import gc
import resource
import sys

# Young objects collected every this many net allocations (CPython's default: 700), and each
# older generation after this many collections of the one below it (default: 10).
YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLD = 20
# How long a thread may hold the interpreter while another waits for it (CPython: 5 ms).
SWITCH_INTERVAL_S = 0.001


def tune_collector() -> None:
    """Freeze what start-up built and collect less often; call once, before the daemon runs.

    Every collection holds all the daemon's threads, its event loop (runs' starts, scrapes)
    included, for as long as it visits the objects of its generations. With CPython's
    defaults a daemon of 200 pairs spent over 40% of its CPU there, stalling the loop for up
    to a second at a time: docs/performance.md, "Scale of one daemon". Objects alive after
    start-up (modules, the app, the config) are never garbage, so the collector stops visiting
    them; what a run makes is freed by reference counting, none of it left in a cycle
    (tests/serve/test_judging.py), and kept baselines are text (``store.keeper.KeptReport``),
    so rarer passes find all there is to find, over fewer objects.
    """
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)


def tune_switching() -> None:
    """Hand the interpreter between threads every millisecond instead of every five.

    The event loop answers scrapes, failure reports and runs' queries; worker threads judge
    runs and write to storage, in pure Python for milliseconds at a time. Whenever one of them
    holds the interpreter, the loop waits up to a switch interval for it, so a request can wait
    5 ms several times over: the intake's p99 (docs/performance.md, "Failure reports intake").
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def raise_file_limit() -> None:
    """Let the daemon open as many files as its hard limit allows, not only its soft one.

    Its connections to targets, storage and the HTTP API's clients (``serve.http.protocol``)
    share one limit, whose soft value is often 1,024 where the hard one is far higher (since
    Docker 25 and containerd 2.0, containers start so), and a Kubernetes pod cannot raise it.
    The soft value is kept low for programs that use select(), whose file numbers end at 1,024;
    nothing here does (asyncio and psycopg wait with epoll and poll). Go raises it likewise.
    Where it cannot be raised, the daemon runs within the soft limit, as before.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
