"""The HTTP surface of a real `ragcanary serve`: which Host names it answers (DNS rebinding),
and notices that only what the daemon did can show."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from daemon_harness import DaemonProcess, free_port, running
from retrievers import FakeRetriever, graded_corpus, target_entry

API_KEY = "sk-http-e2e-4c1d"
ADMIN = "adm-http-e2e-93f0"
QUERIES = [f"question {i:02d}" for i in range(3)]
RUNS_S = 30.0
# What a page of an attacker's site sends once its name resolves to the daemon's address.
FOREIGN = "rebind.attacker.example"
NOTICE = '<p class="notice good" role="status"'  # what announces a pin
GUARDED = ["/ui/", "/ui/baselines", "/api/v1/runs", "/api/v1/jobs", "/openapi.json", "/readyz"]


@pytest.fixture
def retriever() -> Iterator[FakeRetriever]:
    with FakeRetriever(corpus=graded_corpus(QUERIES), api_key=API_KEY) as fake:
        yield fake


def _daemon(
    directory: Path, url: str, listen_host: str = "127.0.0.1", **extra: Any
) -> DaemonProcess:
    cases = [{"id": f"c{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)]
    (directory / "core.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    config = {
        "storage": f"sqlite:///{directory / 'ragcanary.db'}",
        "listen": f"{listen_host}:{port}",
        "targets": {"vendor": target_entry(url, timeout="5s", retries=0)},
        "suites": {"core": {"cases": "core.yaml", "targets": ["vendor"], "every": "1s"}},
        **extra,
    }
    (directory / "ragcanary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {"VENDOR_KEY": API_KEY, "RAGCANARY_ADMIN_TOKEN": ADMIN}
    return DaemonProcess(directory / "ragcanary.yaml", port, env)


def _get(url: str, host: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {"Host": host} if host is not None else {}
    return httpx.get(url, headers=headers, timeout=10, **kwargs)


def test_a_foreign_host_is_refused_with_421_but_metrics_and_healthz_answer(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """A name the daemon was not configured under (DNS rebinding) reads nothing but the open
    /metrics and /healthz; localhost, the listen address and allowed_hosts are served."""
    daemon = _daemon(tmp_path, retriever.url, allowed_hosts=["ragcanary.internal"])
    with running(daemon):
        base, port = daemon.url, daemon.port
        refused = {path: _get(base + path, f"{FOREIGN}:{port}") for path in GUARDED}
        reload = httpx.post(
            base + "/-/reload",
            headers={"Host": FOREIGN, "Authorization": f"Bearer {ADMIN}"},
            timeout=10,
        )
        open_metrics = _get(base + "/metrics", f"{FOREIGN}:{port}")
        open_health = _get(base + "/healthz", FOREIGN)
        served = {
            host: _get(base + "/ui/", host)
            for host in (
                f"127.0.0.1:{port}",
                f"localhost:{port}",
                "LOCALHOST",
                f"ragcanary.internal:{port}",
            )
        }
    for path, response in refused.items():
        assert response.status_code == 421, (path, response.status_code, response.text)
        detail = response.json()["detail"]
        assert FOREIGN in detail, detail
        assert "allowed_hosts" in detail, detail
    assert reload.status_code == 421, reload.text
    assert open_metrics.status_code == 200
    assert "ragcanary_build_info" in open_metrics.text
    assert open_health.status_code == 200
    for host, response in served.items():
        assert response.status_code == 200, (host, response.status_code, response.text)


def _local_address() -> str | None:
    """An IPv4 address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # UDP: picks the route, sends nothing
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_a_daemon_on_every_address_answers_its_own_addresses_only(
    tmp_path: Path, retriever: FakeRetriever
) -> None:
    """listen 0.0.0.0 (a pod): a request to any address of the machine by that address (a
    probe or a scrape by pod IP) is served; another address or a name is refused."""
    address = _local_address()
    if address is None:
        pytest.skip("this machine has no IPv4 address besides loopback")
    daemon = _daemon(tmp_path, retriever.url, listen_host="0.0.0.0")
    with running(daemon):
        port = daemon.port
        by_address = _get(f"http://{address}:{port}/ui/")
        ready = _get(f"http://{address}:{port}/readyz")
        other_ip = _get(f"http://{address}:{port}/ui/", f"203.0.113.9:{port}")
        name = _get(f"http://{address}:{port}/api/v1/runs", f"{FOREIGN}:{port}")
    assert by_address.status_code == 200, by_address.text
    assert ready.status_code == 200, ready.text
    assert other_ip.status_code == 421, other_ip.text
    assert name.status_code == 421, name.text


def test_a_crafted_link_shows_no_pin_notice(tmp_path: Path, retriever: FakeRetriever) -> None:
    """Only the redirect of a pin that happened says "Pinned run": a link that names a run,
    pinned or not, says nothing, nor does the real link altered."""
    daemon = _daemon(tmp_path, retriever.url)
    with running(daemon):
        daemon.wait_runs("core", "vendor", 2, RUNS_S)
        runs = daemon.get("/api/v1/runs", suite="core", target="vendor").json()["runs"]
        newest, first = runs[0]["run_id"], runs[-1]["run_id"]
        crafted = {
            run_id: daemon.get("/ui/baselines", suite="core", target="vendor", pinned=run_id)
            for run_id in (newest, first, "made-up-run")
        }
        pinned = httpx.post(
            daemon.url + "/ui/baselines",
            data={"pair": '["core", "vendor"]', "run_id": newest, "token": ADMIN},
            timeout=10,
        )
        assert pinned.status_code == 303, pinned.text
        location = pinned.headers["location"]
        # Not daemon.get: its params={} would drop the query of the location.
        shown = _get(daemon.url + location)
        altered = _get(daemon.url + location.replace(newest, first))
        baseline = daemon.get("/api/v1/baselines").json()["baselines"]
    for run_id, response in crafted.items():
        assert response.status_code == 200
        assert NOTICE not in response.text, run_id
    assert f"{NOTICE}>Pinned run {newest} as the baseline of core on vendor." in shown.text
    assert NOTICE not in altered.text
    assert [b["run_id"] for b in baseline if b["suite"] == "core"] == [newest]
