"""The failure-report intake of a real `ragcanary serve` on SQLite and PostgreSQL (issue 34).

What a report may hold (no NUL, no lone surrogate), what is stored of it (no personal data,
however it is written), how the daemon answers meanwhile (a flood of digit-heavy reports from
one client), how much memory reports waiting for storage take, and whose address the rate
limit counts (the peer's, or one a trusted proxy forwarded).
"""

from __future__ import annotations

import json
import threading
import time
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy
import yaml
from daemon_harness import DaemonProcess, TcpProxy, config_yaml, free_port, running, wait_for
from retrievers import FakeRetriever, target_entry
from typer.testing import CliRunner

from ragcanary.cli.app import app
from ragcanary.serve.intake.queue import query_key
from ragcanary.store.candidates import CandidateStore, FailureReport
from ragcanary.store.storage import Store

INGEST = "ingest-e2e-7c1d"
ADMIN = "admin-e2e-40fa"
API_KEY = "sk-intake-e2e-5b"
URL = "/api/v1/candidates"
POST = {"Authorization": f"Bearer {INGEST}"}
READ = {"Authorization": f"Bearer {ADMIN}"}
DEADLINE_S = 30.0


def _daemon(
    directory: Path, storage: str, target_url: str = "http://127.0.0.1:9/v2/query", **top: Any
) -> DaemonProcess:
    """A daemon that takes failure reports, with one target and no suite (nothing runs)."""
    port = free_port()
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {"vendor": target_entry(target_url, timeout="5s", retries=0)},
        **top,
    }
    (directory / "ragcanary.yaml").write_text(config_yaml(config), encoding="utf-8")
    env = {
        "VENDOR_KEY": API_KEY,
        "RAGCANARY_INGEST_TOKEN": INGEST,
        "RAGCANARY_ADMIN_TOKEN": ADMIN,
        "RAGCANARY_LOG_FORMAT": "json",
    }
    return DaemonProcess(directory / "ragcanary.yaml", port, env)


def _stored(daemon: DaemonProcess) -> list[dict[str, Any]]:
    answer = httpx.get(daemon.url + URL, headers=READ, timeout=10)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["candidates"])


def _reports_stored(daemon: DaemonProcess) -> int:
    return sum(row["reports"] for row in _stored(daemon))


# -- item 2: a NUL on PostgreSQL -----------------------------------------------------------------


def test_a_report_with_nul_is_refused_and_every_later_one_is_stored_on_postgresql(
    tmp_path: Path, postgres_url: str
) -> None:
    """On PostgreSQL a NUL in a report's text once poisoned the intake: accepted with 202, it
    made every later batch fail and be queued again, so nothing after it was ever stored."""
    daemon = _daemon(tmp_path, postgres_url)
    poisoned = [
        {"query": "why \x00 fails", "signal": "other"},
        {"query": "a note with NUL", "signal": "other", "note": "cut\x00here"},
        {"query": "an id with NUL", "signal": "other", "ids": ["doc-1", "doc\x00-2"]},
        {"query": "a source with NUL", "signal": "other", "source": "web\x00app"},
    ]
    with running(daemon):
        refused = [daemon.post(URL, headers=POST, json=body) for body in poisoned]
        later = [
            daemon.post(URL, headers=POST, json={"query": f"later question {i}", "signal": "other"})
            for i in range(20)
        ]
        assert {r.status_code for r in later} == {202}
        wait_for(lambda: _reports_stored(daemon) == 20, DEADLINE_S, "every later report stored")
        assert [r.status_code for r in refused] == [400] * 4, [r.text for r in refused]
        details = [r.json()["detail"] for r in refused]
        for field, detail in zip(("query", "note", "ids[1]", "source"), details, strict=True):
            assert detail.startswith(f"{field}: "), detail
            assert "NUL" in detail, detail
        assert daemon.get("/readyz").status_code == 200
        scrape = daemon.scrape()
        assert scrape.value("ragcanary_candidates_dropped_total", reason="invalid") == 4


# -- item 10: lone surrogates --------------------------------------------------------------------


HALF = "\ud83d"  # the first half of 😀's surrogate pair; JSON.stringify sends it as "\ud83d"


def test_a_lone_surrogate_is_refused_with_400_naming_its_field(
    tmp_path: Path, store_url: str
) -> None:
    """JavaScript cutting a string inside an emoji sends half of a surrogate pair: taken in
    ``note``, ``ids`` or ``source`` it broke every reader later, and in ``query`` the route
    itself answered 500."""
    daemon = _daemon(tmp_path, store_url)
    with running(daemon):
        statuses = {}
        for field, value in (
            ("query", f"smile {HALF}"),
            ("note", f"cut {HALF}"),
            ("ids", ["doc-1", f"doc-{HALF}"]),
            ("source", f"app {HALF}"),
        ):
            body = {"query": "emoji question", "signal": "other", field: value}
            # json.dumps writes the lone half as the escape \ud83d, as a browser does.
            answer = daemon.post(
                URL,
                headers={**POST, "Content-Type": "application/json"},
                content=json.dumps(body),
            )
            statuses[field] = (answer.status_code, answer.text)
        for field, (status, text) in statuses.items():
            assert status == 400, statuses
            detail = json.loads(text)["detail"]
            name = "ids[1]" if field == "ids" else field
            assert detail.startswith(f"{name}: "), detail
            assert "surrogate" in detail, detail
        assert daemon.scrape().value("ragcanary_candidates_dropped_total", reason="invalid") == 4


def test_a_lone_surrogate_stored_earlier_reads_as_a_replacement_character(
    tmp_path: Path, store_url: str
) -> None:
    """A row that an older version stored with half a surrogate pair: the API, both candidates
    pages and `candidates list` / `show` answer, showing U+FFFD where the half was."""
    with FakeRetriever(corpus={"emoji question": [("doc-7", 0.9)]}, api_key=API_KEY) as fake:
        daemon = _daemon(tmp_path, store_url, fake.url)
        with running(daemon):
            with Store.from_url(store_url) as store:
                report = FailureReport(
                    query_key("emoji question"),
                    "emoji question",
                    "thumbs_down",
                    datetime.now(UTC),
                    target="vendor",
                    ids=("doc-1", f"doc-{HALF}"),
                    note=f"cut {HALF}",
                    source=f"app {HALF}",
                )
                CandidateStore(store).add([report], 100)
            listed = httpx.get(daemon.url + URL, headers=READ, timeout=10)
            assert listed.status_code == 200, listed.text
            (row,) = listed.json()["candidates"]
            (recent,) = row["recent"]
            assert (recent["note"], recent["ids"], recent["source"]) == (
                "cut \ufffd",
                ["doc-1", "doc-\ufffd"],
                "app \ufffd",
            )
            basic = httpx.BasicAuth("admin", ADMIN)
            page = httpx.get(daemon.url + "/ui/candidates", auth=basic, timeout=10)
            assert page.status_code == 200, page.text
            one = httpx.get(daemon.url + f"/ui/candidates/{row['id']}", auth=basic, timeout=10)
            assert one.status_code == 200, one.text
            assert "cut \ufffd" in one.text

            env = {"VENDOR_KEY": API_KEY, "COLUMNS": "200"}
            config = ["-c", str(daemon.config)]
            runner = CliRunner()
            listed_cli = runner.invoke(app, ["candidates", "list", "--json", *config], env=env)
            assert listed_cli.exit_code == 0, listed_cli.output
            shown = runner.invoke(app, ["candidates", "show", str(row["id"]), *config], env=env)
            assert shown.exit_code == 0, shown.output
            assert "note: cut \ufffd" in shown.output
            assert "doc-7" in shown.output  # what the live target answers for it now


# -- item 11: personal data however it is written ------------------------------------------------

# Nine ways people (and their keyboards and browsers) write a phone number or an address that
# the first patterns let through.
PII = {
    "en dashes": "555\u2013867\u20135309",
    "no-break spaces": "555\u00a0867\u00a05309",
    "thin spaces": "555\u2009867\u20095309",
    "non-breaking hyphens": "555\u2011867\u20115309",
    "full-width digits": "\uff15\uff15\uff15-\uff18\uff16\uff17-\uff15\uff13\uff10\uff19",
    "an extension": "555-867-5309x12",
    "spaces around @": "jenny.tutone @ example.com",
    "a full-width @": "jenny.tutone\uff20example.com",
    "a zero-width space": "jenny.tutone\u200b@example.com",
}


def _leaks(text: str) -> list[str]:
    """The pieces of personal data in ``text``, read as a person would (NFKC, no invisibles)."""
    seen = unicodedata.normalize("NFKC", text).replace("\u200b", "")
    digits = "".join(c for c in seen if c.isdigit())
    found = [piece for piece in ("jenny.tutone", "example.com") if piece in seen]
    return found + (["8675309"] if "8675309" in digits else [])


def test_personal_data_written_nine_common_ways_is_redacted_from_query_note_and_source(
    tmp_path: Path,
) -> None:
    daemon = _daemon(tmp_path, f"sqlite:///{tmp_path / 'ragcanary.db'}")
    with running(daemon):
        for i, (how, pii) in enumerate(PII.items()):
            body = {
                "query": f"question {i}: why is {pii} locked out",
                "signal": "thumbs_down",
                "note": f"user gave {pii}",
                "source": f"support chat {pii}",
            }
            answer = daemon.post(URL, headers=POST, json=body)
            assert answer.status_code == 202, (how, answer.text)
            assert _leaks(answer.json()["query"]) == [], (how, answer.json())
        wait_for(lambda: _reports_stored(daemon) == len(PII), DEADLINE_S, "every report stored")
        rows = _stored(daemon)
    leaked = {
        row["query"]: _leaks(json.dumps(row, ensure_ascii=False))
        for row in rows
        if _leaks(json.dumps(row, ensure_ascii=False))
    }
    assert leaked == {}
    for row in rows:
        (report,) = row["recent"]
        assert ("<phone>" in row["query"]) or ("<email>" in row["query"]), row["query"]
        assert report["note"] in ("user gave <phone>", "user gave <email>"), report
        assert report["source"] in ("support chat <phone>", "support chat <email>"), report


# -- item 12: digit-heavy reports and /readyz ----------------------------------------------------


def test_readyz_answers_within_2s_while_one_client_floods_digit_heavy_reports(
    tmp_path: Path,
) -> None:
    """Each such report once cost the event loop tens of milliseconds of redaction, paid before
    the rate limit: one client over its limit held /readyz for two seconds and more."""
    daemon = _daemon(tmp_path, f"sqlite:///{tmp_path / 'ragcanary.db'}")
    body = {
        "query": "1" * 2000,
        "signal": "other",
        "note": "2" * 1000,
        "source": "3" * 200,
    }
    stop = threading.Event()
    statuses: list[int] = []
    lock = threading.Lock()

    def flood() -> None:
        with httpx.Client(base_url=daemon.url, headers=POST, timeout=30) as client:
            while not stop.is_set():
                status = client.post(URL, json=body).status_code
                with lock:
                    statuses.append(status)

    with running(daemon):
        senders = [threading.Thread(target=flood) for _ in range(32)]
        for sender in senders:
            sender.start()
        latencies: list[float] = []
        try:
            wait_for(lambda: len(statuses) >= 100, DEADLINE_S, "the flood to start")
            with httpx.Client(base_url=daemon.url, timeout=30) as probe:
                until = time.monotonic() + 8.0
                while time.monotonic() < until:
                    started = time.monotonic()
                    ready = probe.get("/readyz")
                    latencies.append(time.monotonic() - started)
                    assert ready.status_code == 200, ready.text
                    stop.wait(0.2)
        finally:
            stop.set()
            for sender in senders:
                sender.join(timeout=60)
    assert 429 in statuses
    assert 202 in statuses
    assert max(latencies) < 2.0, f"/readyz took up to {max(latencies):.2f}s: {latencies}"


# -- item 13: memory of the reports waiting for storage ------------------------------------------


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.fixture
def cut_postgres(postgres_url: str) -> Iterator[tuple[str, TcpProxy]]:
    """A PostgreSQL URL through a proxy the test can cut."""
    direct = sqlalchemy.make_url(postgres_url)
    with TcpProxy((direct.host or "127.0.0.1", direct.port or 5432)) as proxy:
        yield direct.set(port=proxy.port).render_as_string(hide_password=False), proxy


def test_reports_waiting_for_storage_are_bounded_in_bytes(
    tmp_path: Path, cut_postgres: tuple[str, TcpProxy]
) -> None:
    """With storage down, 10,000 reports of the largest size once waited in memory: ~611 MiB,
    over the container's 512 Mi limit."""
    storage, proxy = cut_postgres
    limits = {"rate_limit": "100000/s", "burst": 100000}
    daemon = _daemon(tmp_path, storage, candidates=limits)
    with running(daemon), httpx.Client(base_url=daemon.url, headers=POST, timeout=30) as client:
        proxy.stop()
        wait_for(lambda: daemon.get("/readyz").status_code == 503, DEADLINE_S, "storage down")
        before = _rss_mib(daemon.process.pid)
        answers: list[int] = []
        for i in range(3000):
            body = {
                "query": f"question {i:05d} " + "q" * 1980,
                "signal": "other",
                "ids": [f"{i:05d}-{j:03d}-" + "d" * 500 for j in range(100)],
                "note": "n" * 1000,
                "source": "s" * 200,
            }
            answers.append(client.post(URL, json=body).status_code)
            if answers[-1] == 503:
                break
        grown = _rss_mib(daemon.process.pid) - before
        assert answers[-1] == 503, f"{len(answers)} reports taken, RSS +{grown:.0f} MiB"
        assert set(answers[:-1]) == {202}
        assert grown < 100, f"RSS grew {grown:.0f} MiB with {len(answers) - 1} reports waiting"
        assert daemon.scrape().value("ragcanary_candidates_dropped_total", reason="queue_full")
        proxy.start()
        taken = len(answers) - 1
        wait_for(
            lambda: _reports_stored(daemon) == taken, 60, "the queue stored once storage is back"
        )


# -- item 18: whose address the rate limit counts ------------------------------------------------


def _burst(
    daemon: DaemonProcess, count: int, forwarded: str | None, source: str | None
) -> list[int]:
    statuses = []
    with httpx.Client(base_url=daemon.url, headers=POST, timeout=10) as client:
        for i in range(count):
            headers = {"X-Forwarded-For": forwarded.format(i=i)} if forwarded else {}
            body: dict[str, Any] = {"query": f"question {i}", "signal": "other"}
            if source is not None:
                body["source"] = source.format(i=i)
            statuses.append(client.post(URL, json=body, headers=headers).status_code)
    return statuses


def test_the_rate_limit_counts_the_peer_unless_a_trusted_proxy_forwards_the_client(
    tmp_path: Path,
) -> None:
    """A client once escaped its limit by naming a new ``source`` (or X-Forwarded-For) each
    time; only a proxy listed in ``forwarded_allow_ips`` may say who the client is."""
    limits = {"rate_limit": "1/m", "burst": 5}
    daemon = _daemon(tmp_path, f"sqlite:///{tmp_path / 'ragcanary.db'}", candidates=limits)
    with running(daemon):
        spoofed = _burst(daemon, 8, forwarded="10.0.0.{i}", source="app-{i}")
        assert spoofed == [202] * 5 + [429] * 3, spoofed

        config = yaml.safe_load(daemon.config.read_text(encoding="utf-8"))
        config["forwarded_allow_ips"] = ["127.0.0.1"]
        daemon.config.write_text(config_yaml(config), encoding="utf-8")
        reloaded = daemon.post("/-/reload", headers=READ)
        assert reloaded.status_code == 200, reloaded.text
        # Through a trusted proxy each client has a limit of its own...
        assert _burst(daemon, 8, forwarded="10.0.1.{i}", source=None) == [202] * 8
        # ...and one client is held to it, whichever proxy hop it came through.
        one = _burst(daemon, 8, forwarded="10.0.2.1, 127.0.0.1", source=None)
        assert one == [202] * 5 + [429] * 3, one
