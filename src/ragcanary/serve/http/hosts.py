"""Which Host names the API and pages answer: the daemon's own, so DNS rebinding reads nothing.

A web page of any site can point its own name at 127.0.0.1 (DNS rebinding); the browser then
sends its scripts' requests to a loopback-bound daemon and lets them read the answers, as
the site's own. Those requests still name the site in their Host header. So a request is
answered only when its Host is

- ``localhost``, or an IP address that is loopback or the address the connection arrived at
  (a daemon on 0.0.0.0 answers any address of its own: a Kubernetes probe by pod IP); a page
  reached by an IP address has that address as its origin, which no other site can take;
- the host of ``listen`` or of ``ui_url``, or one of ``allowed_hosts`` (``.example.com``:
  that name and every name under it; ``*``: any host, the check off);

and every other request is refused with 421 Misdirected Request. ``/metrics`` and ``/healthz``
answer any host: what they show is public to whoever can connect, and Prometheus and probes
reach them by whatever name service discovery gives. A request without a Host header (HTTP/1.0)
is answered: browsers always send one.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import structlog

from ragcanary.config.model import Config
from ragcanary.serve.http.guard import ASGIApp, Receive, Scope, Send

log = structlog.get_logger("ragcanary")

OPEN_PATHS = frozenset({"/metrics", "/healthz"})
LOGGED_HOSTS = 64  # refused host names logged once each, up to this many per process


def host_of(header: str) -> str | None:
    """The host of a Host header, as ``allowed_hosts:`` entries are written (lower case, no
    port or trailing dot, an IP address in its short form); None when it is not one."""
    text = header.strip().lower()
    if text.startswith("["):  # an IPv6 address, with or without a port
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
    else:
        name, colon, port = text.partition(":")
        if colon and not (port.isascii() and port.isdigit()):
            return None
    name = name.rstrip(".")
    if not name:
        return None
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@dataclass(frozen=True)
class HostRule:
    """The hosts one config answers, besides localhost and the connection's own address."""

    names: frozenset[str]
    suffixes: tuple[str, ...]  # ".example.com": the name and every name under it
    anything: bool = False

    @classmethod
    def of(cls, config: Config) -> HostRule:
        listen_host = host_of(config.listen.rpartition(":")[0])
        # 0.0.0.0 and :: name no address of their own: the connection's address stands in.
        names = {None if _canonical(listen_host) in ("0.0.0.0", "::") else listen_host}
        if config.ui_url:
            names.add(host_of(urlsplit(config.ui_url).netloc.rpartition("@")[2]))
        names.update(h for h in config.allowed_hosts if not h.startswith("."))
        return cls(
            names=frozenset(n for n in names if n),
            suffixes=tuple(h for h in config.allowed_hosts if h.startswith(".")),
            anything="*" in config.allowed_hosts,
        )

    def accepts(self, host: str, arrived_at: str | None) -> bool:
        """Whether a request for ``host`` (from ``host_of``) that arrived at the local address
        ``arrived_at`` is answered."""
        if self.anything or host == "localhost" or host in self.names:
            return True
        if any(host.endswith(suffix) or host == suffix[1:] for suffix in self.suffixes):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address.is_loopback or host == _canonical(arrived_at)


def _canonical(address: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address(address or ""))
    except ValueError:
        return None


class Hosts:
    """Refuse, before anything else, a request whose Host the config does not answer."""

    def __init__(self, app: ASGIApp, config: Callable[[], Config]) -> None:
        self.app = app
        self.config = config  # read per request: a reload may change ui_url or allowed_hosts
        self._rule: tuple[Config, HostRule] | None = None
        self._logged: set[str] = set()

    def rule(self) -> HostRule:
        config = self.config()
        if self._rule is None or self._rule[0] is not config:
            self._rule = (config, HostRule.of(config))
        return self._rule[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"]
        if not given:
            await self.app(scope, receive, send)
            return
        host = host_of(given[0]) if len(given) == 1 else None
        server = scope.get("server")
        arrived_at = str(server[0]) if server else None
        if host is not None and self.rule().accepts(host, arrived_at):
            await self.app(scope, receive, send)
            return
        await self._refuse(send, given[0] if len(given) == 1 else ", ".join(given), scope)

    async def _refuse(self, send: Send, shown: str, scope: Scope) -> None:
        shown = shown[:200]
        listen = self.config().listen
        detail = (
            f"this daemon does not answer for the host {shown!r}: a web page of another site "
            f"could read it through DNS rebinding. Open it as localhost, as {listen} or by "
            "ui_url's host, or add the name to allowed_hosts: in the config."
        )
        if shown not in self._logged and len(self._logged) < LOGGED_HOSTS:
            self._logged.add(shown)
            log.warning("refused a request for another host", host=shown, path=scope["path"])
        payload = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close"),  # its body, if any, is never read
        ]
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
