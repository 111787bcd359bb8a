"""Whose address a request is counted against: X-Forwarded-For only from trusted proxies."""

from __future__ import annotations

import pytest

from ragcanary.serve.intake.forwarded import TrustedProxies


@pytest.mark.parametrize(
    ("trusted", "peer", "forwarded", "client"),
    [
        pytest.param([], "10.0.0.5", ["1.2.3.4"], "10.0.0.5", id="nobody-trusted-by-default"),
        pytest.param([], "127.0.0.1", ["1.2.3.4"], "127.0.0.1", id="not-even-localhost"),
        pytest.param(["10.0.0.1"], "10.0.0.5", ["1.2.3.4"], "10.0.0.5", id="peer-not-listed"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["1.2.3.4"], "1.2.3.4", id="peer-in-network"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", [], "10.0.0.5", id="no-header"),
        pytest.param(
            ["10.0.0.0/8"], "10.0.0.5", ["6.6.6.6, 1.2.3.4"], "1.2.3.4", id="right-most-untrusted"
        ),
        pytest.param(
            ["10.0.0.0/8"],
            "10.0.0.5",
            ["6.6.6.6, 1.2.3.4, 10.0.0.9"],
            "1.2.3.4",
            id="trusted-hops-skipped",
        ),
        pytest.param(
            ["10.0.0.0/8"], "10.0.0.5", ["6.6.6.6", "1.2.3.4"], "1.2.3.4", id="headers-joined"
        ),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["10.0.0.7"], "10.0.0.7", id="all-hops-trusted"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["unknown"], "10.0.0.5", id="not-an-address"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["1.2.3.4:5678"], "1.2.3.4", id="with-a-port"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["[2001:db8::1]:443"], "2001:db8::1", id="v6"),
        pytest.param(["*"], "8.8.8.8", ["6.6.6.6, 1.2.3.4"], "6.6.6.6", id="everyone-left-most"),
        pytest.param(
            ["10.0.0.0/8"], "::ffff:10.0.0.5", ["1.2.3.4"], "1.2.3.4", id="ipv4-mapped-peer"
        ),
        pytest.param(["10.0.0.0/8"], None, ["1.2.3.4"], "unknown", id="no-peer"),
        pytest.param(["10.0.0.0/8"], "10.0.0.5", ["1" * 10_000], "10.0.0.5", id="huge-hop"),
        pytest.param(["*"], "8.8.8.8", ["a" * 10_000], "8.8.8.8", id="huge-hop-everyone"),
    ],
)
def test_the_client_is_the_peer_unless_a_trusted_proxy_forwarded_it(
    trusted: list[str], peer: str | None, forwarded: list[str], client: str
) -> None:
    assert TrustedProxies(trusted).client(peer, forwarded) == client


def test_trusting_nobody_parses_no_address() -> None:
    """The default: no header is looked at, and a peer is not even parsed."""
    proxies = TrustedProxies()
    assert proxies.client("not an address", ["1.2.3.4"]) == "not an address"
    assert "10.0.0.5" not in proxies
