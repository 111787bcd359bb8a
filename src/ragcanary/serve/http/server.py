"""The HTTP API's uvicorn server, on the config's ``listen`` address, without signal handlers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import uvicorn

from ragcanary.serve.http.protocol import BACKLOG, guarded_protocol

if TYPE_CHECKING:
    from fastapi import FastAPI

KEEP_ALIVE_S = 15  # idle keep-alive connections (a scraper reuses its own every scrape)


class ApiServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the daemon owns SIGTERM, SIGINT and SIGHUP."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def api_server(app: FastAPI, listen: str) -> ApiServer:
    """The server of ``app`` on ``listen`` (``host:port``), not started yet."""
    host, _, port = listen.rpartition(":")
    config = uvicorn.Config(
        app,
        host=host.strip("[]") or "127.0.0.1",
        port=int(port),
        log_config=None,
        access_log=False,
        lifespan="off",
        http=guarded_protocol(),
        backlog=BACKLOG,
        timeout_keep_alive=KEEP_ALIVE_S,
        # uvicorn would take X-Forwarded-For from 127.0.0.1 (or as $FORWARDED_ALLOW_IPS says)
        # as the client on every route; the intake reads it from forwarded_allow_ips alone.
        proxy_headers=False,
    )
    return ApiServer(config)
