"""Who sent a request: the peer's address, or the client a trusted proxy says it forwarded.

``X-Forwarded-For`` is whatever the sender wrote, so it is read only from a peer listed in
``forwarded_allow_ips``, as uvicorn's ``--forwarded-allow-ips`` does: each proxy appends the
address it received from, so the client is the right-most address in the header that is not
itself a trusted proxy. From any other peer the header is ignored and the peer is the client.
uvicorn's own reading of the header is turned off (``serve.http.server``): it trusts 127.0.0.1,
or whatever ``$FORWARDED_ALLOW_IPS`` says, for every route.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence

from ragcanary.config.fields import proxy_network

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_LONGEST = 64  # characters of an address with its port: "[" + 45 of IPv6 + "]:65535", and room


class TrustedProxies:
    """The peers whose ``X-Forwarded-For`` is believed."""

    def __init__(self, entries: Sequence[str] = ()) -> None:
        networks = [proxy_network(e) for e in entries]
        self.everyone = any(n is None for n in networks)
        self._networks = [n for n in networks if n is not None]
        # Every request from a proxy asks about the same few addresses: parsing one and
        # looking it up in the networks is several microseconds each time.
        self._trusts = functools.lru_cache(maxsize=4096)(self._trusted)

    def __contains__(self, host: str) -> bool:
        if self.everyone:
            return True
        if not self._networks:
            return False
        # Longer text is no address: not worth a slot of the cache, whoever sends it.
        return self._trusts(host) if len(host) <= _LONGEST else False

    def _trusted(self, host: str) -> bool:
        address = _address(host)
        return address is not None and any(address in n for n in self._networks)

    def client(self, peer: str | None, forwarded_for: Sequence[str]) -> str:
        """The address the rate limit counts: ``peer`` unless it is a trusted proxy that
        forwarded a request (``forwarded_for``: the values of every X-Forwarded-For header)."""
        if peer is None:
            return "unknown"
        if not forwarded_for or peer not in self:
            return peer
        hops = [h.strip() for value in forwarded_for for h in value.split(",") if h.strip()]
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                return peer  # a proxy we trust wrote something that is not an address
            if hop not in self:
                return str(address)
        # Every hop is trusted (always so with *): the first address is the client's.
        first = _address(hops[0]) if hops else None
        return str(first) if first is not None else peer


def _address(host: str) -> Address | None:
    """The IP address in ``host``: bare, ``a.b.c.d:port`` or ``[v6]:port``; None otherwise."""
    if len(host) > _LONGEST:
        return None
    text = host.strip()
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; trust is written in IPv4.
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address
