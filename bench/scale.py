"""Benchmark: the scale one daemon carries, and the load at which it saturates.

The real daemon (``ragcanary serve``'s ``Daemon``, in a process of its own) runs 200 jobs
(10 suites x 20 targets) of 200 canaries each every 60 s against 20 retrievers on 127.0.0.1
(``bench/retriever.py``, raw kind, each its own process, answering after 20 ms), storing in
SQLite and then in PostgreSQL. This process only watches from outside, as Prometheus and an
operator would: it scrapes ``/metrics`` every 5 s (timing each scrape), samples the daemon's
resident memory and CPU time from /proc, and after the daemon stops reads what was stored.
The one thing the daemon's process adds is an APScheduler listener that writes, for every run
it submits or skips, the time it was scheduled for; a run's lag is the time its probe started
(``started_at`` in the stored report) minus that. Then the same work is run every 30, 20, 15
and 10 s (a shorter interval, not a simulated clock) until the daemon falls behind.

    .venv/bin/python bench/run.py scale
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy
import yaml
from prometheus_client.parser import text_string_to_metric_families
from render import section, table, verdict
from retriever import DEPTH, RetrieverProcess
from sqlalchemy.pool import NullPool

TITLE = "Scale of one daemon"
POSTGRES_SERVER = os.environ.get(
    "RAGCANARY_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
DATABASE = "ragcanary_bench_scale"  # created and dropped here; never the shared `test`
LATENCY_S = 0.020
CONCURRENCY = 8  # the config's default, per target and shared by its suites
SCRAPE_EVERY_S = 5.0
GOAL_LAG_S = 1.0
GOAL_RSS_MIB = 50.0
GOAL_SCRAPE_MS = 50.0
MiB = 1024 * 1024
STALL_SITES = 12  # the sites most often sampled while the loop was late, kept in the results
SITE_DEPTH = 4
THREAD_NAMES = {  # the daemon's threads (by name, without their number) and what they do
    "MainThread": "event loop",
    "ragcanary-judge": "judging runs",
    "ragcanary-store-writes": "storage writes",
    "asyncio": "storage reads",
}


@dataclass(frozen=True)
class Load:
    """One daemon's work: ``suites`` x ``targets`` jobs of ``canaries``, every ``every_s``."""

    suites: int
    targets: int
    canaries: int
    every_s: float
    warmup_runs: int  # runs after which the reference memory is taken and lags are counted
    runs: int  # runs measured after the warm-up

    @property
    def jobs(self) -> int:
        return self.suites * self.targets

    @property
    def canaries_per_s(self) -> float:
        return self.jobs * self.canaries / self.every_s


# The warm-up is three runs of every job: the first pins each baseline, and memory grows until
# each pair has kept its baseline and its series (bench/results/scale.json: rss_series).
FULL = Load(suites=10, targets=20, canaries=200, every_s=60, warmup_runs=600, runs=1000)
QUICK = Load(suites=4, targets=5, canaries=50, every_s=10, warmup_runs=60, runs=60)
FULL_POSTGRES = FULL  # as many runs as on SQLite, so that the p99s rest on as many scrapes
QUICK_POSTGRES = QUICK
FULL_STEPS = (30.0, 20.0, 15.0, 10.0)
QUICK_STEPS = (5.0, 2.5)


# --- the daemon's process -------------------------------------------------------------------


def daemon_main(config: Path, events: Path) -> None:
    """``ragcanary serve`` with a listener that records every scheduled run (child process)."""
    import asyncio

    from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_SUBMITTED, JobEvent

    from ragcanary.logs import RedactSecrets, configure_logging
    from ragcanary.serve.daemon import Daemon
    from ragcanary.serve.process_tuning import tune_collector, tune_switching
    from ragcanary.suites.loaded import load_config

    loaded = load_config(config, os.environ)
    redactor = RedactSecrets(loaded.secrets)
    configure_logging(loaded.config.log_level, loaded.config.log_format, redactor)
    daemon = Daemon(config, dict(os.environ), loaded, redactor=redactor)
    out = events.open("a", encoding="utf-8", buffering=1)

    def record(event: JobEvent) -> None:
        if event.job_id == "prune":
            return
        times = getattr(event, "scheduled_run_times", None) or [event.scheduled_run_time]
        skipped = event.code == EVENT_JOB_MAX_INSTANCES
        for when in times:
            line = {"job": event.job_id, "scheduled": when.timestamp(), "skipped": skipped}
            out.write(json.dumps(line) + "\n")

    daemon.scheduler.add_listener(record, EVENT_JOB_SUBMITTED | EVENT_JOB_MAX_INSTANCES)
    pauses = _Pauses(events.with_name("pauses.json"))
    render = daemon.exporter.exposition

    def timed_render() -> bytes:  # the scrape's own work, apart from its wait for the loop
        wall, cpu = time.perf_counter(), time.thread_time()
        text = render()
        pauses.render_ms.append(
            ((time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000)
        )
        return text

    daemon.exporter.exposition = timed_render  # type: ignore[method-assign]

    async def main() -> int:
        watching = asyncio.get_running_loop().create_task(pauses.watch_loop())
        try:
            return await daemon.run()
        finally:
            watching.cancel()

    tune_collector()  # as `ragcanary serve` does
    tune_switching()
    try:
        asyncio.run(main())
    finally:
        out.close()
        pauses.save()


class _Pauses:
    """How long the daemon's event loop stalls (a timer's lateness) and its garbage collector
    runs, both recorded in the daemon's process: what delays a scrape or a run's start."""

    TICK_S = 0.05
    STALL_S = 0.05  # a tick later than this is a stall whose site is sampled
    SAMPLE_S = 0.01

    def __init__(self, path: Path) -> None:
        self.path = path
        self.loop_late_ms: list[float] = []
        self.gc_ms: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.gc_collected: dict[int, list[int]] = {0: [], 1: [], 2: []}
        self._gc_started = 0.0
        gc.callbacks.append(self._on_gc)
        # Where the loop's thread is while the timer is late: sampled from a thread of its own.
        self.stall_sites: Counter[str] = Counter()
        self.other_sites: Counter[str] = Counter()
        self.render_ms: list[tuple[float, float]] = []  # (wall, CPU) of each exposition
        self.thread_cpu: dict[int | None, tuple[str, float]] = {}
        self._beat = time.perf_counter()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="stall-sampler", daemon=True)
        self._sampler.start()

    def _thread_cpu(self) -> None:
        for thread in threading.enumerate():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().split()
                seconds = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
                self.thread_cpu[thread.native_id] = (thread.name, seconds)

    def _sample(self) -> None:
        ticks = 0
        while not self._stop.wait(self.SAMPLE_S):
            ticks += 1
            if ticks % 500 == 0:
                self._thread_cpu()
            if time.perf_counter() - self._beat < self.TICK_S + self.STALL_S:
                continue
            frames = sys._current_frames()
            frame = frames.get(self._loop_thread)
            if frame is not None:
                self.stall_sites[_site(frame)] += 1
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, other in frames.items():
                if ident not in (self._loop_thread, threading.get_ident()):
                    self.other_sites[f"{names.get(ident)}: {_site(other)}"] += 1

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            took = (time.perf_counter() - self._gc_started) * 1000
            self.gc_ms[info["generation"]].append(took)
            self.gc_collected[info["generation"]].append(info["collected"])

    async def watch_loop(self) -> None:
        import asyncio

        while True:
            asked = self._beat = time.perf_counter()
            await asyncio.sleep(self.TICK_S)
            self.loop_late_ms.append((time.perf_counter() - asked - self.TICK_S) * 1000)

    def save(self) -> None:
        gc.callbacks.remove(self._on_gc)
        self._stop.set()
        self._sampler.join()
        sites = self.stall_sites.most_common(STALL_SITES)
        figures = {"loop_late_ms": self.loop_late_ms, "gc_ms": self.gc_ms, "stall_sites": sites}
        figures["other_sites"] = self.other_sites.most_common(30)
        figures["render_ms"] = self.render_ms
        figures["gc_collected"] = self.gc_collected
        self._thread_cpu()
        cpu: Counter[str] = Counter()
        for name, seconds in self.thread_cpu.values():
            cpu[name.rstrip("_0123456789")] += seconds
        figures["thread_cpu_s"] = dict(cpu)
        figures["heap"] = _census()
        self.path.write_text(json.dumps(figures), encoding="utf-8")


def _census() -> dict[str, Any]:
    """What the collector visits once the daemon has stopped: its long-lived objects by type."""
    kinds = Counter(type(o).__qualname__ for o in gc.get_objects())
    sizes = [len(gc.get_objects(generation)) for generation in range(3)]
    return {"frozen": gc.get_freeze_count(), "generations": sizes, "kinds": kinds.most_common(20)}


def _site(frame: Any) -> str:
    """The innermost frames of a stack, ours and the libraries', as one line: a stall's site."""
    names = []
    while frame is not None and len(names) < SITE_DEPTH:
        code = frame.f_code
        where = code.co_filename.rsplit("site-packages/", 1)[-1].rsplit("/src/", 1)[-1]
        names.append(f"{where}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return " < ".join(names)


# --- this process -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_config(workdir: Path, load: Load, urls: list[str], storage: str, port: int) -> Path:
    cases = [
        {"id": f"case-{i}", "query": f"canary query {i}", "relevant": [f"doc-{i % (DEPTH + 2)}"]}
        for i in range(load.canaries)
    ]
    suites = {}
    targets = {
        f"t{t:02d}": {
            "url": url,
            "body": {"q": "{query}", "k": "{k}"},
            "timeout": "10s",
            "concurrency": CONCURRENCY,
            "retries": 1,
        }
        for t, url in enumerate(urls)
    }
    for s in range(load.suites):
        (workdir / f"s{s}.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
        suites[f"s{s}"] = {
            "cases": f"s{s}.json",
            "targets": list(targets),
            "every": f"{load.every_s:g}s",
            "k": [1, 3, 5, 10],
            "depth": DEPTH,
            "baseline": "pinned",
        }
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "log_format": "json",
        "targets": targets,
        "suites": suites,
    }
    path = workdir / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _proc(pid: int) -> tuple[float, float]:
    """Resident memory (MiB) and CPU seconds (user + system, threads included) of ``pid``."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def _machine_cpu() -> tuple[float, float]:
    """The machine's busy and total CPU time so far (seconds over all cores, /proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def _scrape(client: httpx.Client, url: str) -> tuple[float, dict[str, float]]:
    """Milliseconds one GET /metrics took, and the sums of the series this bench watches."""
    started = time.perf_counter()
    response = client.get(url)
    took_ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    sums: dict[str, float] = defaultdict(float)
    watched = {
        "ragcanary_runs_total",
        "ragcanary_runs_skipped_total",
        "ragcanary_queries_total",
        "ragcanary_storage_buffered_runs",
        "ragcanary_storage_errors_total",
    }
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in watched:
                sums[sample.name] += sample.value
    return took_ms, dict(sums)


@contextlib.contextmanager
def _daemon(config: Path, events: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGCANARY_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--daemon", str(config), str(events)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=config.parent,  # a PostgreSQL storage's spool file goes to the working directory
        )
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"the daemon exited with {process.returncode}:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("the daemon did not become ready within 60 s")


def _stored_starts(storage: str) -> dict[str, list[float]]:
    """Each job's stored runs' start times, in order."""
    engine = sqlalchemy.create_engine(storage, poolclass=NullPool)
    starts: dict[str, list[float]] = defaultdict(list)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sqlalchemy.text("SELECT suite, target, started_at FROM runs ORDER BY started_at")
            )
            for suite, target, started_at in rows:
                if isinstance(started_at, str):
                    started_at = datetime.fromisoformat(started_at)
                if started_at.tzinfo is None:
                    started_at = started_at.replace(tzinfo=UTC)
                starts[f"{suite}/{target}"].append(started_at.timestamp())
    finally:
        engine.dispose()
    return starts


def _lags(events: Path, starts: dict[str, list[float]], skip_first: int) -> dict[str, Any]:
    """Each run's lag (its start minus the time it was scheduled for), after the warm-up."""
    scheduled: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    lines.sort(key=lambda line: line["scheduled"])
    ordered = []
    for line in lines:
        if line["skipped"]:
            skipped += 1
            continue
        scheduled[line["job"]].append(line["scheduled"])
        ordered.append(line)
    lags = []
    # The k-th run a job submitted is its k-th stored run; count runs in schedule order.
    seen: dict[str, int] = defaultdict(int)
    for index, line in enumerate(ordered):
        job = line["job"]
        k = seen[job]
        seen[job] += 1
        if index < skip_first or k >= len(starts.get(job, [])):
            continue
        lags.append(starts[job][k] - line["scheduled"])
    lags.sort()
    return {
        "count": len(lags),
        "p50_s": statistics.median(lags) if lags else None,
        "p99_s": lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else None,
        "max_s": lags[-1] if lags else None,
        "skipped": skipped,
        "submitted": len(ordered),
    }


def watch(load: Load, storage: str, urls: list[str], workdir: Path) -> dict[str, Any]:
    """Run one daemon under ``load`` until ``warmup_runs + runs`` runs ended; its figures."""
    port = _free_port()
    config = _write_config(workdir, load, urls, storage, port)
    events, log = workdir / "events.jsonl", workdir / "daemon.log"
    events.unlink(missing_ok=True)
    base = f"http://127.0.0.1:{port}"
    samples: list[dict[str, Any]] = []
    total = load.warmup_runs + load.runs
    # Long enough for every run at the schedule's pace, with room for the start jitter.
    deadline_s = 30 + (total / load.jobs + 1) * load.every_s * 1.5
    with _daemon(config, events, log) as process, httpx.Client(timeout=30) as client:
        _wait_ready(f"{base}/readyz", process, log)
        started = time.monotonic()
        warm: dict[str, Any] | None = None
        while True:
            took_ms, sums = _scrape(client, f"{base}/metrics")
            rss, cpu = _proc(process.pid)
            sample = {"t": time.monotonic() - started, "scrape_ms": took_ms, "rss_mib": rss}
            machine_busy, machine_all = _machine_cpu()
            sample |= {"cpu_s": cpu, "machine_busy_s": machine_busy, "machine_s": machine_all}
            sample |= sums
            samples.append(sample)
            runs = sums.get("ragcanary_runs_total", 0.0)
            if warm is None and runs >= load.warmup_runs:
                warm = sample
            if runs >= total or sample["t"] > deadline_s:
                break
            time.sleep(SCRAPE_EVERY_S)
        last = samples[-1]
    assert warm is not None, "the daemon never finished its warm-up runs"
    pauses = json.loads((workdir / "pauses.json").read_text(encoding="utf-8"))
    late = sorted(pauses["loop_late_ms"])
    collections = {int(g): sorted(ms) for g, ms in pauses["gc_ms"].items()}
    found = {int(g): sum(n) for g, n in pauses["gc_collected"].items()}
    starts = _stored_starts(storage)
    stored = sum(len(v) for v in starts.values())
    after = [s for s in samples if s["t"] >= warm["t"]]
    window_s = last["t"] - warm["t"]
    queries = last.get("ragcanary_queries_total", 0) - warm.get("ragcanary_queries_total", 0)
    cpu_s = last["cpu_s"] - warm["cpu_s"]
    scrapes = sorted(s["scrape_ms"] for s in after)
    return {
        "load": vars(load),
        "lag": _lags(events, starts, load.warmup_runs),
        "runs_done": last.get("ragcanary_runs_total", 0.0),
        "runs_stored": stored,
        "skipped_metric": last.get("ragcanary_runs_skipped_total", 0.0),
        "storage_errors": last.get("ragcanary_storage_errors_total", 0.0),
        "buffered_max": max(s.get("ragcanary_storage_buffered_runs", 0.0) for s in samples),
        "rss_warm_mib": warm["rss_mib"],
        "rss_end_mib": last["rss_mib"],
        "rss_max_mib": max(s["rss_mib"] for s in after),
        "rss_series": [(round(s["t"]), round(s["rss_mib"], 1)) for s in samples],
        "scrape_ms": {
            "median": statistics.median(scrapes),
            "p99": scrapes[min(len(scrapes) - 1, int(len(scrapes) * 0.99))],
            "max": scrapes[-1],
            "count": len(scrapes),
        },
        "scrape_samples_ms": [round(s["scrape_ms"], 1) for s in samples],
        "loop_late_ms": {
            "p50": statistics.median(late),
            "p99": late[min(len(late) - 1, int(len(late) * 0.99))],
            "max": late[-1],
            "over_100ms": sum(1 for ms in late if ms > 100),
        },
        "gc": {
            str(g): {
                "count": len(ms),
                "total_ms": sum(ms),
                "max_ms": ms[-1] if ms else 0.0,
                "collected": found[g],  # objects it found unreachable: garbage in cycles
            }
            for g, ms in collections.items()
        },
        "stall_sites": pauses.get("stall_sites", []),
        "other_sites": pauses.get("other_sites", []),
        "thread_cpu_s": pauses.get("thread_cpu_s", {}),
        "heap": pauses.get("heap", {}),
        "render_ms": pauses.get("render_ms", []),
        "window_s": window_s,
        "queries": queries,
        "cpu_s": cpu_s,
        "cores": cpu_s / window_s if window_s else 0.0,
        # How busy the whole machine was (the retrievers, PostgreSQL and the daemon share it).
        "machine_busy": (last["machine_busy_s"] - warm["machine_busy_s"])
        / max(1e-9, last["machine_s"] - warm["machine_s"]),
        "canaries_per_s": queries / window_s if window_s else 0.0,
        "cpu_ms_per_canary": cpu_s * 1000 / queries if queries else 0.0,
    }


def _postgres(database: str | None) -> str:
    url = sqlalchemy.engine.make_url(POSTGRES_SERVER)
    return url.set(database=database).render_as_string(hide_password=False)


def _fresh_database() -> str | None:
    """The URL of an empty PostgreSQL database of this bench's own; None when unreachable."""
    engine = sqlalchemy.create_engine(
        POSTGRES_SERVER,
        poolclass=NullPool,
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 3},
    )
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            conn.exec_driver_sql(f"CREATE DATABASE {DATABASE}")
    except sqlalchemy.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()
    return _postgres(DATABASE)


def _drop_database() -> None:
    engine = sqlalchemy.create_engine(
        POSTGRES_SERVER, poolclass=NullPool, isolation_level="AUTOCOMMIT"
    )
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    finally:
        engine.dispose()


def run(quick: bool) -> dict[str, Any]:
    load = QUICK if quick else FULL
    pg_load = QUICK_POSTGRES if quick else FULL_POSTGRES
    steps = QUICK_STEPS if quick else FULL_STEPS
    result: dict[str, Any] = {"latency_s": LATENCY_S, "concurrency": CONCURRENCY}
    with contextlib.ExitStack() as stack:
        retrievers = [stack.enter_context(RetrieverProcess(LATENCY_S)) for _ in range(load.targets)]
        urls = [r.url for r in retrievers]

        def measure(label: str, one: Load, storage_for: Any) -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="ragcanary-scale-") as tmp:
                workdir = Path(tmp)
                storage = storage_for(workdir)
                figures = watch(one, storage, urls[: one.targets], workdir)
            lag = figures["lag"]
            print(
                f"  {label}: {figures['canaries_per_s']:.0f} canaries/s on"
                f" {figures['cores']:.2f} cores ({figures['cpu_ms_per_canary']:.2f} ms each),"
                f" lag p99 {lag['p99_s']:.3f} s, skipped {lag['skipped']},"
                f" RSS {figures['rss_warm_mib']:.0f} -> {figures['rss_end_mib']:.0f} MiB,"
                f" scrape p99 {figures['scrape_ms']['p99']:.0f} ms,"
                f" stored {figures['runs_stored']}/{figures['runs_done']:.0f}",
                flush=True,
            )
            return figures

        result["sqlite"] = measure("sqlite", load, lambda w: f"sqlite:///{w}/ragcanary.db")
        pg_url = _fresh_database()
        if pg_url is None:
            if os.environ.get("RAGCANARY_REQUIRE_POSTGRES") == "1":
                raise RuntimeError(f"PostgreSQL is not reachable at {POSTGRES_SERVER}")
            result["postgresql"] = {"skipped": f"PostgreSQL unreachable at {POSTGRES_SERVER}"}
        else:
            try:
                result["postgresql"] = measure("postgresql", pg_load, lambda w: pg_url)
            finally:
                _drop_database()
        result["steps"] = []
        for every_s in steps:
            step = Load(
                suites=load.suites,
                targets=load.targets,
                canaries=load.canaries,
                every_s=every_s,
                warmup_runs=load.jobs,
                runs=2 * load.jobs,
            )
            figures = measure(f"every-{every_s:g}s", step, lambda w: f"sqlite:///{w}/ragcanary.db")
            figures.pop("rss_series")
            result["steps"].append(figures)
            if _saturated(figures):
                break
    return result


def _saturated(figures: dict[str, Any]) -> bool:
    """The daemon fell behind: late runs, skipped runs, or runs it did not finish."""
    lag = figures["lag"]
    behind = figures["runs_done"] < figures["load"]["warmup_runs"] + figures["load"]["runs"]
    return bool(lag["skipped"] or (lag["p99_s"] or 0) > GOAL_LAG_S or behind)


# --- the docs section -----------------------------------------------------------------------


def _row(label: str, figures: dict[str, Any]) -> list[str]:
    lag = figures["lag"]
    load = figures["load"]
    growth = figures["rss_end_mib"] - figures["rss_warm_mib"]
    return [
        label,
        f"{load['suites'] * load['targets']}",
        f"{load['every_s']:g} s",
        f"{figures['canaries_per_s']:,.0f}",
        f"{lag['count']:,}",
        f"{lag['p50_s']:.3f} / {lag['p99_s']:.3f} / {lag['max_s']:.3f}",
        f"{lag['skipped']}",
        f"{figures['rss_warm_mib']:.0f} → {figures['rss_end_mib']:.0f} ({growth:+.1f})",
        f"{figures['scrape_ms']['median']:.0f} / {figures['scrape_ms']['p99']:.0f}",
        f"{figures['runs_stored']:,} / {figures['runs_done']:,.0f},"
        f" max {figures['buffered_max']:.0f}",
        f"{figures['cores']:.2f}",
        f"{figures['cpu_ms_per_canary']:.2f}",
    ]


HEADERS = [
    "daemon",
    "jobs",
    "every",
    "canaries/s",
    "runs timed",
    "lag s: p50 / p99 / max",
    "skipped",
    "RSS MiB: warm → end (growth)",
    "/metrics ms: median / p99",
    "runs stored / done, most buffered",
    "cores used",
    "CPU ms per canary",
]


def render(result: dict[str, Any]) -> str:
    rows = [_row("SQLite, the issue's load", result["sqlite"])]
    pg = result.get("postgresql", {})
    if "skipped" not in pg:
        rows.append(_row("PostgreSQL, the issue's load", pg))
    for step in result["steps"]:
        rows.append(_row(f"SQLite, every {step['load']['every_s']:g} s", step))
    figures = table(HEADERS, rows)
    if "skipped" in pg:
        figures += f"\n\nPostgreSQL was not measured: {pg['skipped']}."
    load = result["sqlite"]["load"]
    jobs = load["suites"] * load["targets"]
    steps = ", ".join(f"{s['load']['every_s']:g}" for s in result["steps"])
    what = (
        f"The real daemon (`Daemon`, as `ragcanary serve` runs it, in its own process) with"
        f" {load['suites']} suites x {load['targets']} targets = {jobs} jobs of"
        f" {load['canaries']} labelled canaries, every {load['every_s']:g} s, pinned baselines,"
        f" against {load['targets']} retrievers on 127.0.0.1 (`bench/retriever.py`, raw kind,"
        f" one process each, answering after {result['latency_s'] * 1000:g} ms; each target's"
        f" concurrency {result['concurrency']}, shared by its suites). The retrievers answer"
        " alike every time, like an unchanged retriever: what a canary daemon sees most of its"
        " life. From outside, every 5 s (Prometheus is usually set to 15 s): one timed"
        " `GET /metrics`, the daemon's resident memory (VmRSS) and its CPU time (all its"
        " threads) from /proc. Inside the daemon's process, an APScheduler listener records"
        " the time each run was scheduled for (or that it was skipped), a timer every 50 ms"
        " records how late the event loop wakes it (and, from a thread of its own, where the"
        " loop's thread is while that timer is late), `gc.callbacks` time the garbage"
        " collector, the exporter's rendering of `/metrics` is timed, and each thread's CPU"
        " time is read from /proc. A run's lag is its `started_at`, as stored, minus its"
        " scheduled time."
        f" The first {load['warmup_runs']} runs are the warm-up (three runs of every job: the"
        " start jitter, the first run pinning each baseline, memory growing until each pair"
        f" has kept its baseline and its exported series); then {load['runs']} runs are"
        " measured, and the memory after the warm-up is the reference for growth. The same"
        " load is then stored in PostgreSQL (a database of its own on the machine's server),"
        f" and run every {steps} s, the same work at a shorter interval, until the daemon falls"
        " behind (a run skipped, lag p99 above 1 s, or runs not done in time). CPU per canary"
        " is the daemon's CPU over the measured window divided by the canaries it sent,"
        " everything included: probe, evaluation, report, export, storage, logs, scrapes."
    )
    return section(what, "scale", figures, _meaning(result))


def _meaning(result: dict[str, Any]) -> str:
    sqlite = result["sqlite"]
    lag = sqlite["lag"]
    growth = sqlite["rss_end_mib"] - sqlite["rss_warm_mib"]
    goals = [
        f"schedule lag p99 {lag['p99_s']:.3f} s ({verdict(lag['p99_s'], GOAL_LAG_S)} ≤ 1 s)",
        f"{lag['skipped']} runs skipped ({'met' if not lag['skipped'] else '**missed**'})",
        f"RSS growth after the warm-up {growth:+.1f} MiB over {lag['count']:,} runs"
        f" ({verdict(growth, GOAL_RSS_MIB)} ≤ 50 MiB)",
        f"`/metrics` p99 {sqlite['scrape_ms']['p99']:.0f} ms"
        f" ({verdict(sqlite['scrape_ms']['p99'], GOAL_SCRAPE_MS)} ≤ 50 ms)",
        f"SQLite stored {sqlite['runs_stored']:,} of {sqlite['runs_done']:,.0f} runs with at most"
        f" {sqlite['buffered_max']:.0f} waiting",
    ]
    pg = result.get("postgresql", {})
    if "skipped" not in pg:
        scrape = pg["scrape_ms"]
        goals.append(
            f"PostgreSQL stored {pg['runs_stored']:,} of {pg['runs_done']:,.0f} runs with at most"
            f" {pg['buffered_max']:.0f} waiting, {pg['lag']['skipped']} runs skipped"
            f" ({'met' if not pg['lag']['skipped'] else '**missed**'}),"
            f" lag p99 {pg['lag']['p99_s']:.3f} s, `/metrics`"
            f" p99 {scrape['p99']:.0f} ms ({verdict(scrape['p99'], GOAL_SCRAPE_MS)} ≤ 50 ms;"
            f" median {scrape['median']:.0f} ms), the event loop woken late by"
            f" {pg['loop_late_ms']['p99']:.0f} ms at p99 against"
            f" {sqlite['loop_late_ms']['p99']:.0f} ms with SQLite (the machine's two cores"
            f" {pg.get('machine_busy', 0):.0%} busy against {sqlite.get('machine_busy', 0):.0%})."
            " On PostgreSQL every daemon is a replica and fires each job at its phase, the same"
            " on every replica (`serve/schedule/jobs.py`, `grid_phases`: n jobs exactly 1/n of the"
            " interval apart, in the order of golden-ratio steps; until 2026-11-26 the steps"
            " themselves, uneven by up to 2.3 jobs in 5 s depending on where the minute"
            " begins). Until 2026-11-26 jobs fired at moments hashed from their names, which"
            " bunch up (up to 9 of these 200 jobs in one second, gaps up to 1.6 s): runs probed"
            " in bursts, and two full runs measured `/metrics` p99 at 72 and 102 ms, loop late"
            " p99 43 ms and lag p99 0.133 s. Over 600 runs with `watch()` above (scrapes every"
            " second), even phases took the loop's lateness p99 from 25 to 12 ms, the lag p99"
            " from 0.093 to 0.025 s and the scrape p99 from 31 to 22 ms"
        )
    slow = [
        f"{_slow(figures)} of {figures['scrape_ms']['count']} on {name}"
        for name, figures in (("SQLite", sqlite), ("PostgreSQL", pg))
        if "skipped" not in figures and figures["scrape_ms"]["p99"] > GOAL_SCRAPE_MS
    ]
    if slow:
        longest = max(
            g["max_ms"] for f in (sqlite, pg) if "skipped" not in f for g in f["gc"].values()
        )
        goals.append(
            f"the scrapes over 50 ms ({', '.join(slow)}; a p99 of so few is nearly the worst)"
            " waited for an event loop held up by worker threads holding the interpreter, or"
            f" by a garbage collection (the longest took {longest:.0f} ms)"
        )
    if "skipped" not in pg and lag["p99_s"] > GOAL_LAG_S >= pg["lag"]["p99_s"]:
        goals.append(
            "late runs are SQLite's: the same load on PostgreSQL starts on time, although a"
            " run's storage call before its probe (the pinned baseline's check) no longer"
            " waits behind other runs' writes to the one file, which have a thread of their own"
            " (`store/keeper.py`)"
        )
    steps = result["steps"]
    kept = [s for s in steps if not _saturated(s)]
    fell = [s for s in steps if _saturated(s)]
    best = max([sqlite, *kept], key=lambda s: s["canaries_per_s"])
    late, collected = sqlite["loop_late_ms"], sqlite["gc"]
    gc_s = sum(g["total_ms"] for g in collected.values()) / 1000
    renders = sorted(cpu for _, cpu in sqlite.get("render_ms", [])[1:]) or [0.0]
    threads = sqlite.get("thread_cpu_s", {})
    by_thread = ", ".join(
        f"{THREAD_NAMES.get(name, name)} {seconds:.0f} s"
        for name, seconds in sorted(threads.items(), key=lambda item: -item[1])
        if name in THREAD_NAMES
    )
    sites = sqlite.get("stall_sites", [])
    where = (
        f" While the timer was late, the loop's thread was most often at `{_frame(sites[0][0])}`"
        f" ({sites[0][1]} of {sum(n for _, n in sites)} samples of the commonest sites, over"
        " the daemon's life, start-up included)"
        + (
            ": waiting to take the interpreter back after a socket write, while another thread"
            " held it."
            if "selector_events" in sites[0][0]
            else "."
        )
        if sites
        else ""
    )
    stalls = (
        f" The event loop woke a 50 ms timer late by more than 100 ms {late['over_100ms']}"
        f" times (p99 {late['p99']:.0f} ms, longest {late['max']:.0f} ms): a scrape or a run's"
        " start waits behind whatever holds the loop: the probes' HTTP client, a garbage"
        f" collection, or a worker thread holding the interpreter.{where} CPU by thread over"
        f" the daemon's life: {by_thread}. A run's evaluation and report (pure Python, tens of"
        " ms for 200 canaries) and the decoding of a newly pinned baseline run in a worker"
        " thread (`serve/schedule/judging.py`), which takes the interpreter from the loop only"
        " for a switch interval at a time (1 ms, as `ragcanary serve` sets it; 0.2 ms was measured"
        " too, 2026-11-26: more CPU and slower scrapes). A scrape's own rendering took"
        f" {statistics.median(renders):.1f} ms of CPU (median; {renders[-1]:.0f} ms at most,"
        " after the first): each pair's text is rendered as its run ends"
        " (`Exporter.observe_run`), so a scrape joins cached texts. Rendered by the scrape"
        " instead, it took 25 to 60 ms while runs were ending, and jobs whose first runs all"
        " fell in the first 30 s of the minute probed in bursts that kept the loop busy for"
        " half of every minute (scrapes at a median of 73 to 154 ms, measured 2026-11-26 over"
        " 300 runs); first runs now lie evenly over the interval (`serve/schedule/jobs.py`,"
        " `MAX_START_JITTER_S`). The garbage collector ran"
        f" {gc_s:.1f} s in all (timed by its callbacks, so waits for the interpreter count):"
        f" {collected['0']['count']} young collections finding {collected['0']['collected']:,}"
        f" objects in all, {collected['1']['count']} middle, {collected['2']['count']} full;"
        f" the longest took {max(g['max_ms'] for g in collected.values()):.0f} ms. Once the"
        f" daemon stopped it still held {sum(sqlite['heap']['generations']):,} containers the"
        " collector visits (besides those frozen at start-up: `serve/process_tuning.py`, which also"
        " makes collections rarer). Until 2026-11-26 every query's response was left in a"
        " reference cycle (httpx's response and its stream), with its request, headers and"
        " aiohttp's response: each young collection found about 20,000 objects and held the"
        " loop 16 ms (up to 55 ms), 189 of them in 5 minutes, and middle ones took up to"
        " 146 ms; and every pair's pinned and previous report were kept as dicts and lists"
        " (517,000 long-lived containers after 500 runs against 212,000 since). Both are gone:"
        " a response is freed when closed (`probe.transport.close`), a pinned pair keeps no"
        " previous report, and kept reports are JSON text (`store.keeper.KeptReport`);"
        " measured over 300 runs with `watch()` above. With CPython's defaults the collector"
        " took over 40% of the daemon's CPU at this load (measured 2026-11-25 over 600 runs:"
        " 71 s of about 160 s, 98 full collections of 0.5 s on average, up to 1.1 s)."
    )
    if fell:
        top = fell[0]
        per_core = top["canaries_per_s"] / top["cores"] if top["cores"] else 0.0
        saturation = (
            f" It kept up with {best['canaries_per_s']:,.0f} canaries/s (every"
            f" {best['load']['every_s']:g} s, {best['cores']:.2f} cores of CPU,"
            f" {best['cpu_ms_per_canary']:.2f} ms per canary, all its work included). Asked"
            f" for {_asked(top):,.0f} canaries/s (every {top['load']['every_s']:g} s) it"
            f" managed {top['canaries_per_s']:,.0f} on {top['cores']:.2f} cores, with lag p99"
            f" {top['lag']['p99_s']:.2f} s and {top['lag']['skipped']} runs skipped:"
            f" **one daemon saturates at about {top['canaries_per_s']:,.0f} canaries per"
            f" second here, {per_core:,.0f} per second per core of CPU it got, and that is"
            " where replicas take over** (issue 11: replicas on one PostgreSQL split the jobs,"
            " each tick run once). Add a replica before a daemon's load reaches about"
            f" {0.7 * top['canaries_per_s']:,.0f} canaries/s (70% of that), so that slow"
            " retrievers, reloads and bursts of runs ending together do not make runs late."
        )
    else:
        per_core = 1000 / best["cpu_ms_per_canary"] if best["cpu_ms_per_canary"] else 0.0
        saturation = (
            f" It kept up at every interval measured, up to {best['canaries_per_s']:,.0f}"
            f" canaries/s on {best['cores']:.2f} cores ({best['cpu_ms_per_canary']:.2f} ms of"
            f" CPU per canary): one core would carry about {per_core:,.0f} canaries/s, the"
            " most one daemon (one event loop) can, and where replicas take over."
        )
    return (
        "At the issue's load on this machine: "
        + "; ".join(goals)
        + "."
        + stalls
        + saturation
        + " The retrievers and other engineers' processes share the same two cores here (see"
        " the load average): on a machine of its own a daemon carries more."
    )


def _slow(figures: dict[str, Any]) -> int:
    """How many of the scrapes after the warm-up took longer than the goal."""
    after = figures["scrape_samples_ms"][-figures["scrape_ms"]["count"] :]
    return sum(1 for ms in after if ms > GOAL_SCRAPE_MS)


def _frame(site: str) -> str:
    """The innermost frame of a stall site, as file:line function."""
    return site.split(" < ")[0].rsplit("/lib/python3", 1)[-1].split("/", 1)[-1]


def _asked(figures: dict[str, Any]) -> float:
    """The canaries per second a load asks for."""
    load = figures["load"]
    return float(load["suites"] * load["targets"] * load["canaries"] / load["every_s"])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--daemon":
        daemon_main(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: bench/scale.py --daemon CONFIG EVENTS (run it through bench/run.py)")
