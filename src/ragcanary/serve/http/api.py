"""The HTTP API of `ragcanary serve`: metrics, health, reload, runs, diffs, history, baselines;
and the web pages under /ui/ (serve.http.ui.pages)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from ragcanary import __version__
from ragcanary.config.units import (
    MAX_DURATION_S,
    DurationOutOfRange,
    parse_duration,
    parse_duration_between,
)
from ragcanary.errors import ConfigError, UsageError
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.diff import ForeignRun
from ragcanary.serve.http.change_routes import add_change_routes
from ragcanary.serve.http.guard import Guard
from ragcanary.serve.http.hosts import Hosts
from ragcanary.serve.http.ui.pages import add_pages
from ragcanary.serve.service import NoSuchJudgment, Refused
from ragcanary.store.errors import AmbiguousRun, StorageError
from ragcanary.threads import run_in

if TYPE_CHECKING:
    from ragcanary.serve.service import Service


class BaselineRequest(BaseModel):
    run_id: str | None = None


class ErrorBody(BaseModel):
    """What every refused request answers: why, and what to do about it."""

    detail: str


_ERRORS = {
    400: "the body is not JSON, or the new config is invalid (the old one keeps running)",
    401: "missing or wrong bearer token",
    403: "the admin API is disabled: no RAGCANARY_ADMIN_TOKEN is set",
    413: "the request body is over 1 MB",
    429: "too many failure reports from this client; Retry-After says when to try again",
    404: "no such run, case, change, judgment or target, or nothing stored yet to answer with",
    409: "a change window over 24h without max: true; or a judgment that cannot be decided so "
    "(not proposed, its case gone or changed, or already labelled): the reason says which",
    422: "a field of the body is wrong: `field` names it, `detail` says what to write",
    503: "storage is unreachable",
}


# /readyz answers within 2 s whatever storage does: a hung check answers 503 at this deadline.
READY_DEADLINE_S = 1.5


# A judgment's number as its column holds it (an Integer: PostgreSQL's int4); past it, 422.
JudgmentId = Annotated[int, Path(ge=1, le=2**31 - 1)]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses an operation answers besides 200 and 422."""
    return {code: {"model": ErrorBody, "description": _ERRORS[code]} for code in codes}


# A duration like 30s, 5m, 1h30m or 7d: other text is refused by the schema itself (422), a
# duration outside 1s..3650d by the handler (400).
SinceQuery = Annotated[str | None, Query(pattern=r"^(\d+(\.\d+)?(ms|s|m|h|d|w))+$|^\d+(\.\d+)?$")]


def _window(since: str) -> float:
    """Seconds of a ``since`` query parameter: 400 out of range, 422 not a duration."""
    try:
        return parse_duration_between(since, "since")
    except DurationOutOfRange as exc:
        raise HTTPException(400, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, f"since: {exc}; write it like 1h, 7d or 30d") from None


def _storage_down(exc: StorageError) -> HTTPException:
    return HTTPException(503, f"storage unreachable: {exc}")


def create_app(service: Service) -> FastAPI:
    """The FastAPI app bound to one running daemon, through the narrow ``Service`` protocol
    (``serve.daemon_service.DaemonService``)."""
    # No Swagger UI or ReDoc: both load from a CDN (blank offline); /docs is a page of ours.
    app = FastAPI(title="ragcanary", version=__version__, docs_url=None, redoc_url=None)
    app.add_middleware(
        Guard,
        admin_token=lambda: service.loaded.config.admin_token,
        ingest_token=lambda: service.loaded.config.ingest_token,
    )
    # Added last, so it runs first: a request for another host learns nothing, not even
    # whether a token would be needed.
    app.add_middleware(Hosts, config=lambda: service.loaded.config)

    async def storage(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await run_in(None, fn, *args, **kwargs)
        except StorageError as exc:
            raise _storage_down(exc) from None
        except (ForeignRun, AmbiguousRun) as exc:
            raise HTTPException(400, str(exc)) from None
        except UsageError as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        # Not generate_latest(registry): that renders all pairs' series again on every scrape.
        return Response(service.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "not ready; reason says why"}})
    async def readyz() -> JSONResponse:
        # Ready means runs can be stored: a write must commit, not only a read. A read-only
        # file or a database in recovery answers reads and refuses every run.
        reason = await service.writable(READY_DEADLINE_S)
        storage_ok = reason is None
        body: dict[str, Any] = {
            "ready": storage_ok,
            "config": True,
            "storage": storage_ok,
            "reason": reason,
            "buffered_runs": service.buffered_runs,
        }
        replica = service.replica
        if replica is not None:
            # A replica that cannot write claims no tick: the others run its jobs meanwhile.
            body["replica"] = {
                "id": replica.replica_id,
                "live_replicas": replica.live,
                "claiming": storage_ok,
            }
            if not storage_ok:
                body["reason"] = f"{reason}; claiming no runs until it returns (others run them)"
        return JSONResponse(body, status_code=200 if storage_ok else 503)

    @app.post("/-/reload", responses=_errors(400, 401, 403, 413))
    async def reload() -> JSONResponse:
        result = await service.reload()
        return JSONResponse(result.body(), status_code=result.status)

    @app.get("/api/v1/jobs")
    async def jobs() -> dict[str, Any]:
        return {"jobs": service.next_runs()}

    @app.get("/api/v1/runs", responses=_errors(400, 503))
    async def runs(
        suite: str | None = None,
        target: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        outcome: Literal["ok", "regression", "unavailable"] | None = None,
        since: SinceQuery = None,
    ) -> dict[str, Any]:
        start = None
        if since is not None:
            start = datetime.now(UTC) - timedelta(seconds=_window(since))
        found = await storage(service.runs, suite, target, limit, outcome, start)
        return {"runs": found}

    @app.get("/api/v1/runs/{run_id}", responses=_errors(400, 404, 503))
    async def run(run_id: str) -> dict[str, Any]:
        # The id, or a unique prefix of it as `ragcanary run` prints it.
        run_id = await storage(service.resolve_run, run_id)
        report: RunReport | None = await storage(service.report, run_id)
        if report is None:
            raise HTTPException(404, f"no run {run_id}")
        return marshal(report)

    @app.get("/api/v1/diff", responses=_errors(400, 404, 503))
    async def diff(
        suite: str,
        target: str,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> dict[str, Any]:
        return dict(await storage(service.diff, suite, target, from_, to))

    @app.get("/api/v1/history", responses=_errors(400, 404, 503))
    async def history(
        suite: str, case: str, target: str | None = None, since: SinceQuery = "7d"
    ) -> dict[str, Any]:
        suites = service.loaded.suites
        if suite not in suites or case not in suites[suite].by_id:
            raise HTTPException(404, f"no case {case!r} in suite {suite!r}")
        window = _window(since or "7d")
        rows = await storage(service.case_history, suite, case, target, timedelta(seconds=window))
        return {"suite": suite, "case": case, "history": rows}

    @app.get("/api/v1/slo", responses=_errors(503))
    async def slo(suite: str | None = None, target: str | None = None) -> dict[str, Any]:
        """Each SLO's error budget and burn rates, from the stored runs of its window."""
        return {"slo": await storage(service.slo_budgets, suite, target)}

    @app.get("/api/v1/baselines", responses=_errors(503))
    async def baselines() -> dict[str, Any]:
        return {"baselines": await storage(service.baselines)}

    @app.post("/api/v1/baselines/{suite}/{target}", responses=_errors(400, 401, 403, 404, 413, 503))
    async def set_baseline(
        suite: str,
        target: str,
        # No body at all means the same as {}: pin the latest successful run.
        body: BaselineRequest | None = None,
        # Declared for OpenAPI only: Guard has checked it before the body was read.
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        run_id = body.run_id if body is not None else None
        if run_id is None:
            latest = await storage(service.latest_run, suite, target, outcome="ok")
            if latest is None:
                raise HTTPException(404, f"no successful run of {suite}/{target} to pin")
            run_id = latest["run_id"]
        else:
            run_id = await storage(service.resolve_run, run_id)
        pinned: RunReport | None = await storage(service.report, run_id)
        if pinned is None or pinned.pair != (suite, target):
            raise HTTPException(404, f"no run {run_id} of suite {suite} on target {target}")
        try:
            await service.set_baseline(suite, target, run_id)
        except StorageError as exc:
            raise _storage_down(exc) from None
        return {"suite": suite, "target": target, "run_id": run_id}

    @app.post(
        "/api/v1/candidates", status_code=202, responses=_errors(400, 401, 403, 413, 429, 503)
    )
    async def add_candidate(
        request: Request,
        # Declared for OpenAPI only: Guard has checked it before the body was read.
        authorization: Annotated[str | None, Header()] = None,
    ) -> JSONResponse:
        """A failure report of the application: queued for review, never waiting on storage."""
        peer = request.client.host if request.client else None
        forwarded = request.headers.getlist("x-forwarded-for")
        try:
            query = await service.receive_report(await request.body(), peer, forwarded)
        except Refused as refused:
            headers = {"Retry-After": str(math.ceil(refused.retry_s))} if refused.retry_s else None
            return JSONResponse({"detail": refused.reason}, refused.status, headers=headers)
        return JSONResponse({"accepted": True, "query": query}, 202)

    @app.get("/api/v1/candidates", responses=_errors(400, 401, 403, 503))
    async def list_candidates(
        status: Literal["pending", "promoted", "dismissed"] = "pending",
        signal: str | None = None,
        since: SinceQuery = None,
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Failure reports by normalised query, the most reported first (needs the admin token:
        they are what users asked)."""
        start = None
        if since:
            try:  # a filter, not a window to compute: longer than ten years is everything
                seconds = min(parse_duration(since), MAX_DURATION_S)
            except DurationOutOfRange:
                seconds = MAX_DURATION_S
            except ValueError as exc:
                raise HTTPException(422, f"since: {exc}; write it like 1h, 7d or 30d") from None
            start = datetime.now(UTC) - timedelta(seconds=seconds)
        rows = await storage(service.candidates, status, signal, start)
        return {"candidates": rows}

    add_change_routes(app, service, storage, _errors(400, 401, 403, 404, 409, 413, 422, 503))

    @app.get("/api/v1/judgments", responses=_errors(400, 503))
    async def list_judgments(
        state: Literal["queued", "proposed", "refused", "accepted", "rejected", "all"] = "proposed",
        suite: str | None = None,
        case: str | None = None,
        run_id: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> dict[str, Any]:
        """A judge's grades of documents nobody labelled, newest first (docs/judgments.md)."""
        shown = None if state == "all" else state
        rows = await storage(service.judgments, shown, suite, case, run_id, limit)
        return {"judgments": rows}

    @app.get("/api/v1/judgments/{judgment_id}", responses=_errors(404, 503))
    async def one_judgment(judgment_id: JudgmentId) -> dict[str, Any]:
        found = await storage(service.judgment, judgment_id)
        if found is None:
            raise HTTPException(404, f"no judgment {judgment_id}")
        return dict(found)

    @app.post(
        "/api/v1/judgments/{judgment_id}/{decision}",
        responses=_errors(400, 401, 403, 404, 409, 413, 503),
    )
    async def decide_judgment(
        judgment_id: JudgmentId,
        decision: Literal["accept", "reject"],
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Accept (the label is written into the suite file, and the config reloaded) or
        reject a proposed judgment; 409 when it cannot be, saying why."""
        try:
            return await service.decide_judgment(judgment_id, decision == "accept")
        except StorageError as exc:
            raise _storage_down(exc) from None
        except NoSuchJudgment as exc:
            raise HTTPException(404, str(exc)) from None
        except ConfigError as exc:
            raise HTTPException(409, "; ".join(str(p) for p in exc.problems)) from None
        except UsageError as exc:
            raise HTTPException(409, str(exc)) from None

    add_pages(app, service)
    return app
