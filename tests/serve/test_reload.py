"""Schedules and reloads on a real `ragcanary serve`: every schedule form starts, `/-/reload`
answers with what changed or the located problems, and a rejected reload changes nothing."""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_harness import DaemonProcess, config_yaml, free_port, running, wait_for
from retrievers import FakeRetriever, graded_corpus, target_entry

from ragcanary.serve.daemon import Daemon, suite_pairs
from ragcanary.serve.metrics.exporter import Exporter, SuitePairs
from ragcanary.suites.loaded import load_config

API_KEY = "sk-reload-5e1f0a"
ADMIN_TOKEN = "adm-reload-77c2"  # POST /-/reload needs it (issue 11 item 9)
QUERIES = [f"question {i:02d}" for i in range(6)]
RUNS_S = 20.0
FAST = {"cases": "cases.yaml", "targets": ["vendor"], "every": "1s", "k": [1, 5]}
HOURLY = {"cases": "cases.yaml", "targets": ["vendor"], "every": "1h", "k": [1, 5]}
CRON = {"cases": "cases.yaml", "targets": ["vendor"], "cron": "* * * * *", "k": [1, 5]}
BOMB = "\n".join(
    [
        'lol0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)),
        "suites: *l9",
    ]
)


@dataclass
class Setup:
    """A retriever and a config directory; ``write`` sets the suites the daemon serves."""

    directory: Path
    retriever: FakeRetriever
    port: int

    @property
    def config(self) -> Path:
        return self.directory / "ragcanary.yaml"

    def write(self, suites: dict[str, Any], extra: str = "") -> None:
        data = {
            "storage": f"sqlite:///{self.directory / 'ragcanary.db'}",
            "listen": f"127.0.0.1:{self.port}",
            "targets": {"vendor": target_entry(self.retriever.url, timeout="5s", retries=0)},
            "suites": suites,
        }
        self.config.write_text(yaml.safe_dump(data, sort_keys=False) + extra, encoding="utf-8")

    def daemon(self, *args: str) -> DaemonProcess:
        """The daemon of this config; ``args`` follow ``serve -c CONFIG``."""
        env = {"VENDOR_KEY": API_KEY, "RAGCANARY_ADMIN_TOKEN": ADMIN_TOKEN}
        return DaemonProcess(self.config, self.port, env, args=args)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    cases = [
        {"id": f"case-{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)
    ]
    (tmp_path / "cases.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as retriever:
        yield Setup(tmp_path, retriever, free_port())


def reload(daemon: DaemonProcess) -> Any:
    return daemon.post("/-/reload", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})


def jobs(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    answer = daemon.get("/api/v1/jobs")
    assert answer.status_code == 200, answer.text
    return {f"{j['suite']}/{j['target']}": j for j in answer.json()["jobs"]}


def reload_gauge(daemon: DaemonProcess) -> float | None:
    return daemon.scrape().value("ragcanary_config_last_reload_successful")


def test_serve_starts_with_every_schedule_form_and_runs_them(setup: Setup) -> None:
    """A cron: suite beside an every: suite: serve starts, lists both jobs and runs them."""
    setup.write({"fast": FAST, "minutely": CRON})
    with running(setup.daemon()) as daemon:
        daemon.wait_runs("fast", "vendor", 2, RUNS_S)
        listed = jobs(daemon)
        assert set(listed) == {"fast/vendor", "minutely/vendor"}
        assert listed["minutely/vendor"]["trigger"].startswith("cron[")
        assert listed["minutely/vendor"]["next_run_at"] is not None
        assert daemon.process.poll() is None


def test_reload_into_a_cron_config_answers_what_changed(setup: Setup) -> None:
    """Adding a cron suite by reload is 200 with the job added; the running one is unchanged."""
    setup.write({"fast": FAST})
    with running(setup.daemon()) as daemon:
        setup.write({"fast": FAST, "minutely": CRON})
        answer = reload(daemon)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["reloaded"] is True
        assert body["changes"]["jobs"] == {
            "added": ["minutely/vendor"],
            "removed": [],
            "changed": [],
            "unchanged": ["fast/vendor"],
        }
        assert body["changes"]["targets"]["unchanged"] == ["vendor"]
        assert reload_gauge(daemon) == 1
        assert set(jobs(daemon)) == {"fast/vendor", "minutely/vendor"}
        daemon.wait_runs("fast", "vendor", 1, RUNS_S)


@pytest.mark.parametrize("bad", ["alias bomb", "60 MB", "every: 1ms", "duplicate key"])
def test_a_rejected_reload_changes_nothing_and_says_where(setup: Setup, bad: str) -> None:
    """400 with each located problem; the old jobs keep their times and keep running."""
    setup.write({"fast": FAST, "hourly": HOURLY})
    with running(setup.daemon()) as daemon:
        before = jobs(daemon)
        if bad == "alias bomb":
            setup.config.write_text(BOMB, encoding="utf-8")
            expected = "YAML anchor &l0 is not allowed"
        elif bad == "60 MB":
            with setup.config.open("ab") as handle:
                handle.truncate(60_000_000)
            expected = "the file is 60.0 MB"
        elif bad == "every: 1ms":
            setup.write({"fast": {**FAST, "every": "1ms"}, "hourly": HOURLY})
            expected = "suites.fast.every: '1ms' is shorter than 1s"
        else:
            setup.write({"fast": FAST, "hourly": HOURLY}, extra="listen: 127.0.0.1:1\n")
            expected = "key 'listen' appears twice"
        started = time.monotonic()
        answer = reload(daemon)
        assert time.monotonic() - started < 5
        assert answer.status_code == 400, answer.text
        body = answer.json()
        assert body["reloaded"] is False
        assert any(expected in p and str(setup.config) in p for p in body["problems"]), body
        assert all(" line " in p or bad == "60 MB" for p in body["problems"]), body
        assert reload_gauge(daemon) == 0
        after = jobs(daemon)
        assert set(after) == set(before)
        # The hourly job keeps its time; its first run comes at a jittered moment after the
        # start, and when that fell between the two looks, its next is exactly an hour on.
        moved = datetime.fromisoformat(
            after["hourly/vendor"]["next_run_at"]
        ) - datetime.fromisoformat(before["hourly/vendor"]["next_run_at"])
        assert moved in (timedelta(0), timedelta(hours=1)), moved
        daemon.wait_runs("fast", "vendor", 2, RUNS_S)
        assert daemon.process.poll() is None


def test_a_reload_keeps_the_listen_address_given_on_the_command_line(setup: Setup) -> None:
    """`serve --listen` outlives a reload of the unchanged file: no "listen changed" warning,
    the same config hash, and ragcanary_ui_info still the address the daemon answers at."""
    setup.write({"hourly": HOURLY})
    # The file names another address; --listen overrides it.
    elsewhere = f"127.0.0.1:{free_port()}"
    text = setup.config.read_text(encoding="utf-8")
    setup.config.write_text(text.replace(f"127.0.0.1:{setup.port}", elsewhere), encoding="utf-8")
    here = f"127.0.0.1:{setup.port}"
    with running(setup.daemon("--listen", here)) as daemon:
        before = daemon.scrape()
        answer = reload(daemon)
        assert answer.status_code == 200, answer.text
        after = daemon.scrape()
        log = daemon.log
    assert before.label_values("ragcanary_ui_info", "url") == {f"http://{here}"}
    assert after.label_values("ragcanary_ui_info", "url") == {f"http://{here}"}
    hashes = after.label_values("ragcanary_config_hash", "hash")
    assert hashes == before.label_values("ragcanary_config_hash", "hash"), hashes
    assert len(hashes) == 1
    assert "warnings" not in answer.json(), answer.json()
    assert "listen changed" not in log


def test_reloads_leave_the_schedule_of_unchanged_jobs_alone(setup: Setup) -> None:
    """A hundred reloads of the same config never move an hourly job's next run."""
    setup.write({"hourly": HOURLY})
    with running(setup.daemon()) as daemon:
        first = datetime.fromisoformat(jobs(daemon)["hourly/vendor"]["next_run_at"])
        for _ in range(100):
            answer = reload(daemon)
            assert answer.status_code == 200, answer.text
            assert answer.json()["changes"]["jobs"]["unchanged"] == ["hourly/vendor"]
        last = datetime.fromisoformat(jobs(daemon)["hourly/vendor"]["next_run_at"])
        # Unless its first run came meanwhile (then the next is an hour on), it is where it was.
        assert last == first or (datetime.now(UTC) >= first and last >= first + timedelta(hours=1))


def test_a_changed_schedule_is_rescheduled_and_reported_changed(setup: Setup) -> None:
    """A suite whose interval changes gets the new trigger; the other keeps its next run."""
    setup.write({"fast": FAST, "hourly": HOURLY})
    with running(setup.daemon()) as daemon:
        before = jobs(daemon)
        setup.write({"fast": {**FAST, "every": "2s"}, "hourly": HOURLY})
        answer = reload(daemon)
        assert answer.status_code == 200, answer.text
        assert answer.json()["changes"]["jobs"]["changed"] == ["fast/vendor"]
        after = jobs(daemon)
        assert "0:00:02" in after["fast/vendor"]["trigger"]
        assert after["hourly/vendor"]["next_run_at"] == before["hourly/vendor"]["next_run_at"]


def test_concurrent_reloads_and_sighup_run_one_at_a_time(setup: Setup) -> None:
    """Twenty reloads at once, plus SIGHUP, all succeed and leave exactly the configured jobs."""
    setup.write({"fast": FAST})
    with running(setup.daemon()) as daemon:
        setup.write({"fast": FAST, "hourly": HOURLY})
        daemon.signal(signal.SIGHUP)
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(lambda _: reload(daemon), range(20)))
        assert [a.status_code for a in answers] == [200] * 20
        added = [a.json()["changes"]["jobs"]["added"] for a in answers]
        assert sum(1 for a in added if a) <= 1  # the job is added once, by whichever came first
        wait_for(lambda: set(jobs(daemon)) == {"fast/vendor", "hourly/vendor"}, RUNS_S, "jobs")
        assert reload_gauge(daemon) == 1


class ExporterThatFailsOnce(Exporter):
    """An exporter whose next ``load`` fails, as a bug in applying a config would."""

    fail_next = False

    def load(
        self,
        pairs: Mapping[str, SuitePairs],
        *,
        config_hash: str | None = None,
        ui_url: str | None = None,
        runbook_url: str | None = None,
    ) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the registry refused a series")
        super().load(pairs, config_hash=config_hash, ui_url=ui_url, runbook_url=runbook_url)


@pytest.mark.anyio
async def test_a_reload_that_fails_to_apply_is_rolled_back(tmp_path: Path) -> None:
    """Half-applied is not an outcome: the old jobs, times and config stay, the gauge says 0."""
    (tmp_path / "cases.yaml").write_text(
        json.dumps({"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}), encoding="utf-8"
    )
    path = tmp_path / "ragcanary.yaml"
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query")},
        "suites": {"hourly": HOURLY, "daily": {**HOURLY, "every": "1d"}},
    }
    path.write_text(config_yaml(config), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    exporter = ExporterThatFailsOnce()
    daemon = Daemon(path, environ, load_config(path, environ), exporter=exporter)
    exporter.load(suite_pairs(daemon.loaded))
    daemon.scheduler.start(paused=True)  # jobs are laid out but none runs during the test
    daemon.jobs.schedule_all(daemon.loaded, daemon.prune)
    before = {job.id: (str(job.trigger), job.next_run_time) for job in daemon.scheduler.get_jobs()}
    old = daemon.loaded
    config["suites"] = {"hourly": {**HOURLY, "every": "2h"}, "minutely": CRON}
    path.write_text(config_yaml(config), encoding="utf-8")
    exporter.fail_next = True
    try:
        result = await daemon.reload()
        assert (result.reloaded, result.status) == (False, 500)
        assert "rolled back" in result.problems[0]
        after = {
            job.id: (str(job.trigger), job.next_run_time) for job in daemon.scheduler.get_jobs()
        }
        assert after == before
        assert daemon.loaded is old
        assert "ragcanary_config_last_reload_successful 0.0" in exporter.exposition().decode()
        # The same config applies cleanly once nothing fails.
        assert (await daemon.reload()).status == 200
        assert {job.id for job in daemon.scheduler.get_jobs()} == {
            "prune",
            "hourly/vendor",
            "minutely/vendor",
        }
    finally:
        daemon.scheduler.shutdown(wait=False)
        await daemon.keeper.close()


@pytest.mark.anyio
async def test_a_reload_that_changes_ui_url_replaces_the_ui_info_series(tmp_path: Path) -> None:
    """Alert and dashboard links follow ui_url: the old URL's series goes, the new one comes."""
    (tmp_path / "cases.yaml").write_text(
        json.dumps({"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}), encoding="utf-8"
    )
    path = tmp_path / "ragcanary.yaml"
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "listen": "0.0.0.0:9464",  # no address to link to: only ui_url gives one
        "ui_url": "https://old.example.com",
        "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query")},
        "suites": {"hourly": HOURLY},
    }
    path.write_text(config_yaml(config), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    exporter = Exporter()
    daemon = Daemon(path, environ, load_config(path, environ), exporter=exporter)
    daemon._export_config(daemon.loaded)  # what startup() does
    daemon.scheduler.start(paused=True)
    daemon.jobs.schedule_all(daemon.loaded, daemon.prune)
    sample = exporter.registry.get_sample_value
    try:
        assert sample("ragcanary_ui_info", {"url": "https://old.example.com"}) == 1.0
        config["ui_url"] = "https://new.example.com/ragcanary/"
        path.write_text(config_yaml(config), encoding="utf-8")
        assert (await daemon.reload()).status == 200
        assert sample("ragcanary_ui_info", {"url": "https://new.example.com/ragcanary"}) == 1.0
        assert sample("ragcanary_ui_info", {"url": "https://old.example.com"}) is None
        del config["ui_url"]
        path.write_text(config_yaml(config), encoding="utf-8")
        assert (await daemon.reload()).status == 200
        assert "ragcanary_ui_info{" not in exporter.exposition().decode()
    finally:
        daemon.scheduler.shutdown(wait=False)
        await daemon.keeper.close()


@pytest.mark.anyio
async def test_runbook_base_url_is_exported_for_the_alerts_and_follows_a_reload(
    tmp_path: Path,
) -> None:
    """ragcanary_runbook_info{url} carries runbook_base_url, where the alert rules link each
    alert's runbook; unset, there is no series and the rules link the daemon's own pages."""
    (tmp_path / "cases.yaml").write_text(
        json.dumps({"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}), encoding="utf-8"
    )
    path = tmp_path / "ragcanary.yaml"
    config = {
        "storage": f"sqlite:///{tmp_path / 'ragcanary.db'}",
        "ui_url": "https://ragcanary.example.com",
        "runbook_base_url": "https://wiki.example.com/runbooks/",
        "targets": {"vendor": target_entry("http://127.0.0.1:9/v2/query")},
        "suites": {"hourly": HOURLY},
    }
    path.write_text(config_yaml(config), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    exporter = Exporter()
    daemon = Daemon(path, environ, load_config(path, environ), exporter=exporter)
    daemon._export_config(daemon.loaded)  # what startup() does
    daemon.scheduler.start(paused=True)
    daemon.jobs.schedule_all(daemon.loaded, daemon.prune)
    sample = exporter.registry.get_sample_value
    try:
        assert sample("ragcanary_runbook_info", {"url": "https://wiki.example.com/runbooks"}) == 1
        del config["runbook_base_url"]
        path.write_text(config_yaml(config), encoding="utf-8")
        assert (await daemon.reload()).status == 200
        assert "ragcanary_runbook_info{" not in exporter.exposition().decode()
        assert sample("ragcanary_ui_info", {"url": "https://ragcanary.example.com"}) == 1.0
    finally:
        daemon.scheduler.shutdown(wait=False)
        await daemon.keeper.close()


@pytest.mark.anyio
@pytest.mark.parametrize("seed", range(5))
async def test_first_runs_of_many_jobs_lie_evenly_over_their_interval(
    tmp_path: Path, seed: int
) -> None:
    """200 jobs every minute start spread over the whole minute, with no clump or long gap:
    jobs started together probe in bursts, and the event loop then answers scrapes late."""
    storage = f"sqlite:///{tmp_path / 'ragcanary.db'}"
    started, firsts = await first_runs(tmp_path, storage, random.Random(seed))
    assert_even_over_a_minute(started, firsts.values())


@pytest.mark.anyio
async def test_replicas_fire_many_jobs_evenly_and_alike(tmp_path: Path, postgres_url: str) -> None:
    """On PostgreSQL every daemon is a replica and fires its jobs on a grid that every replica
    shares; those 200 jobs every minute must lie as evenly over the minute as without replicas
    (independent moments, as hashed from each job's name, bunch up to 9 in one second), and two
    replicas started apart fire each job at the same moment."""
    started, one = await first_runs(tmp_path, postgres_url, random.Random(1))
    _, other = await first_runs(tmp_path, postgres_url, random.Random(2))
    assert_even_over_a_minute(started, one.values())
    # The grid is fixed to the minute, not to when the daemon started: it must be even
    # wherever a minute is taken to begin, or this test passes or fails by the clock.
    assert_even_wherever_a_minute_begins(one.values())
    assert {job: (t.second, t.microsecond) for job, t in one.items()} == {
        job: (t.second, t.microsecond) for job, t in other.items()
    }


async def first_runs(
    directory: Path, storage: str, rng: random.Random
) -> tuple[datetime, dict[str, datetime]]:
    """A moment just before 200 jobs every minute (10 suites x 20 targets) were scheduled, and
    when each first runs."""
    (directory / "cases.yaml").write_text(
        json.dumps({"cases": [{"id": "a", "query": "q", "relevant": ["x"]}]}), encoding="utf-8"
    )
    path = directory / "ragcanary.yaml"
    targets = {f"t{i:02d}": target_entry("http://127.0.0.1:9/v2/query") for i in range(20)}
    minutely = {"cases": "cases.yaml", "targets": list(targets), "every": "1m"}
    config = {
        "storage": storage,
        "targets": targets,
        "suites": {f"s{i}": minutely for i in range(10)},
    }
    path.write_text(config_yaml(config), encoding="utf-8")
    environ = {"VENDOR_KEY": API_KEY}
    daemon = Daemon(path, environ, load_config(path, environ), rng=rng)
    daemon.scheduler.start(paused=True)
    started = datetime.now(UTC)
    daemon.jobs.schedule_all(daemon.loaded, daemon.prune)
    try:
        jobs = daemon.scheduler.get_jobs()
        return started, {job.id: job.next_run_time for job in jobs if job.id != "prune"}
    finally:
        daemon.scheduler.shutdown(wait=False)
        await daemon.keeper.close()


def assert_even_over_a_minute(started: datetime, runs: Iterable[datetime]) -> None:
    firsts = sorted((run - started).total_seconds() for run in runs)
    assert len(firsts) == 200
    assert firsts[0] >= 0
    assert firsts[-1] <= 60.5
    # Even spacing is 0.3 s; 200 independent random moments leave a gap of about 1.6 s.
    gaps = [b - a for a, b in zip([0.0, *firsts], [*firsts, 60.0], strict=True)]
    assert max(gaps) < 0.6, max(gaps)
    # Every 5 s holds 5 s worth of them, give or take two: no burst of starts.
    for window in range(12):
        inside = sum(1 for t in firsts if window * 5 <= t < window * 5 + 5)
        assert abs(inside - 200 / 12) <= 2, (window, inside)


def assert_even_wherever_a_minute_begins(runs: Iterable[datetime]) -> None:
    """Every 5 s of the minute, wherever it begins, holds 5 s worth of ``runs``, give or take
    one, and no two lie less than 0.3 s apart (even spacing for 200 a minute)."""
    moments = sorted(run.timestamp() % 60.0 for run in runs)
    gaps = [b - a for a, b in zip(moments, [*moments[1:], moments[0] + 60.0], strict=True)]
    assert min(gaps) > 0.299, min(gaps)
    around = [*(t - 60.0 for t in moments), *moments, *(t + 60.0 for t in moments)]
    for start in moments:  # the fullest and the emptiest 5 s begin at a run or just after one
        for begin in (start, start + 1e-6):
            inside = sum(1 for t in around if begin <= t < begin + 5.0)
            assert abs(inside - len(moments) / 12) <= 1, (begin, inside)
