"""Each target's HTTP client and limits, shared by every suite that probes it, across reloads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import httpx

from ragcanary.config.target import TargetConfig
from ragcanary.probe.runner import TargetGate


class Connections:
    """One client (its pool of connections) and one gate (concurrency, rate limit) per target.

    Both are made when a target is first probed. A reload gives changed targets new clients
    while the runs in flight finish on the old ones, and keeps a gate while its limits stay.
    """

    def __init__(self, factory: Callable[[TargetConfig], httpx.AsyncClient]) -> None:
        self._factory = factory
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._gates: dict[str, TargetGate] = {}
        self._closing: set[asyncio.Task[None]] = set()  # retired clients waiting for their runs

    def client(self, name: str, config: TargetConfig) -> httpx.AsyncClient:
        if name not in self._clients:
            self._clients[name] = self._factory(config)
        return self._clients[name]

    def gate(self, name: str, config: TargetConfig) -> TargetGate:
        if name not in self._gates:
            self._gates[name] = TargetGate(config.concurrency, config.rate_limit)
        return self._gates[name]

    def keep_gates(self, old: Mapping[str, TargetConfig], new: Mapping[str, TargetConfig]) -> None:
        """Keep the gates of targets whose limits ``new`` leaves as ``old`` had them.

        Runs still in flight hold the old gate: a fresh one would let the new config's runs
        start beside them and exceed the target's concurrency and rate limit together.
        """
        self._gates = {
            name: gate
            for name, gate in self._gates.items()
            if name in new
            and (new[name].concurrency, new[name].rate_limit)
            == (old[name].concurrency, old[name].rate_limit)
        }

    def retire(self, targets: tuple[str, ...], runs: list[asyncio.Task[None]]) -> None:
        """New runs of ``targets`` get new clients; the old ones close once ``runs`` end.

        Closing a client under a run in flight would fail its remaining queries and turn a
        mere reload into an "unavailable" run.
        """
        clients = [self._clients.pop(name) for name in targets if name in self._clients]
        if not clients:
            return
        closing = asyncio.get_running_loop().create_task(_close(clients, runs))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every client, and wait a little for the retired ones."""
        for client in self._clients.values():
            await client.aclose()
        if self._closing:
            await asyncio.wait(self._closing, timeout=5)


async def _close(clients: list[httpx.AsyncClient], runs: list[asyncio.Task[None]]) -> None:
    if runs:
        await asyncio.wait(runs)
    for client in clients:
        await client.aclose()
