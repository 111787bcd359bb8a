"""Which Host names the daemon answers: the parse of a Host header and the rule of a config."""

from __future__ import annotations

from typing import Any

import pytest

from ragcanary.config.model import Config
from ragcanary.serve.http.hosts import HostRule, host_of


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("localhost", "localhost"),
        ("LocalHost:9464", "localhost"),
        ("ragcanary.example.com.", "ragcanary.example.com"),
        ("127.0.0.1:9464", "127.0.0.1"),
        ("[::1]:9464", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("10.1.2.3", "10.1.2.3"),
        ("", None),
        (":9464", None),
        ("evil.example:port", None),
        ("evil.example:\uff19\uff14\uff16\uff14", None),  # non-ASCII digits
        ("[::1", None),
        ("[::1]x", None),
        ("::1", None),  # an IPv6 address needs its brackets
    ],
)
def test_a_host_header_is_read_like_an_allowed_hosts_entry(header: str, host: str | None) -> None:
    assert host_of(header) == host


def _rule(**config: Any) -> HostRule:
    return HostRule.of(Config(**config))


LOOPBACK = {"listen": "127.0.0.1:9464"}
POD = {"listen": "0.0.0.0:9464"}


@pytest.mark.parametrize(
    ("config", "host", "arrived_at", "answered"),
    [
        # A daemon on loopback answers the names of loopback and nothing else.
        (LOOPBACK, "localhost", "127.0.0.1", True),
        (LOOPBACK, "127.0.0.1", "127.0.0.1", True),
        (LOOPBACK, "127.0.0.2", "127.0.0.1", True),
        (LOOPBACK, "::1", "127.0.0.1", True),
        (LOOPBACK, "rebind.attacker.example", "127.0.0.1", False),
        (LOOPBACK, "localhost.attacker.example", "127.0.0.1", False),
        (LOOPBACK, "203.0.113.9", "127.0.0.1", False),
        # On 0.0.0.0 (a pod), the address a request arrived at: a probe by pod IP.
        (POD, "10.244.1.7", "10.244.1.7", True),
        (POD, "10.244.1.8", "10.244.1.7", False),
        (POD, "0.0.0.0", "10.244.1.7", False),
        (POD, "ragcanary.monitoring.svc", "10.244.1.7", False),
        # The names the config gives: listen's host, ui_url's host, allowed_hosts.
        ({"listen": "canary.internal:9464"}, "canary.internal", "10.0.0.5", True),
        ({**POD, "ui_url": "https://rc.example.com/base"}, "rc.example.com", "10.0.0.5", True),
        ({**POD, "ui_url": "https://rc.example.com"}, "example.com", "10.0.0.5", False),
        ({**POD, "allowed_hosts": ["ragcanary"]}, "ragcanary", "10.0.0.5", True),
        ({**POD, "allowed_hosts": ["192.168.1.5"]}, "192.168.1.5", "172.18.0.3", True),
        ({**POD, "allowed_hosts": [".svc"]}, "ragcanary.monitoring.svc", "10.0.0.5", True),
        ({**POD, "allowed_hosts": [".svc"]}, "svc", "10.0.0.5", True),
        ({**POD, "allowed_hosts": [".svc"]}, "ragcanary.svc.attacker.example", "10.0.0.5", False),
        ({**POD, "allowed_hosts": [".svc"]}, "attackersvc", "10.0.0.5", False),
        ({**POD, "allowed_hosts": ["*"]}, "anything.example", "10.0.0.5", True),
        # No socket address (a Unix socket, an in-process transport): names only.
        (POD, "10.0.0.5", None, False),
    ],
)
def test_a_config_answers_its_own_hosts_only(
    config: dict[str, Any], host: str, arrived_at: str | None, answered: bool
) -> None:
    assert _rule(**config).accepts(host, arrived_at) is answered
