"""The routes of declared changes: record one, finish one, list them (docs/api.md, "Changes")."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragcanary.store.change_records import (
    DEFAULT_WINDOW,
    DESCRIPTION_PATTERN,
    MAX_DESCRIPTION,
    MAX_TARGETS,
    WINDOW_PATTERN,
    Change,
    ChangeProblem,
    PairVerdict,
    change_request,
)

if TYPE_CHECKING:
    from ragcanary.serve.service import Service

Storage = Callable[..., Awaitable[Any]]  # api.create_app's storage(): a thread, 503 when down


class ChangeBody(BaseModel):
    """A change to record, as OpenAPI shows it (the handler checks the JSON itself, so that
    every refusal names its field the same way)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reindex", "embedding_model", "config", "deploy", "other"]
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION, pattern=DESCRIPTION_PATTERN)
    targets: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1, max_length=MAX_TARGETS)
    window: str = Field(DEFAULT_WINDOW, pattern=WINDOW_PATTERN)  # over 24h only with max
    max: bool = False  # allow a window over 24h (up to 30d)


def add_change_routes(
    app: FastAPI, service: Service, storage: Storage, errors: dict[int | str, dict[str, Any]]
) -> None:
    """``POST /api/v1/changes``, ``POST /api/v1/changes/{id}/finish``, ``GET /api/v1/changes``,
    ``GET /api/v1/changes/{id}``."""

    @app.post(
        "/api/v1/changes",
        status_code=201,
        responses=errors,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ChangeBody.model_json_schema()}},
            }
        },
    )
    async def start_change(
        request: Request,
        # Declared for OpenAPI only: Guard has checked it before the body was read.
        authorization: Annotated[str | None, Header()] = None,
    ) -> JSONResponse:
        """Record a change and open its window: the targets' alerts are held until it ends.

        A malformed field answers 422, a target the config lacks 404, a window over 24h
        without ``max`` 409; each names its ``field``."""
        try:
            body = json.loads(await request.body())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HTTPException(400, f"the body is not JSON ({exc}); send a JSON object") from None
        try:
            checked = change_request(body, service.loaded.config.targets)
        except ChangeProblem as problem:
            body = {"detail": str(problem), "field": problem.field}
            return JSONResponse(body, problem.status)
        change: Change = await storage(service.record_change, checked)
        await service.windows_changed()
        return JSONResponse(_shown(change) | {"id": change.change_id}, 201)

    @app.post("/api/v1/changes/{change_id}/finish", responses=errors)
    async def finish_change(
        change_id: str, authorization: Annotated[str | None, Header()] = None
    ) -> dict[str, Any]:
        """End a change's window now; a window already closed is left as it was."""
        change: Change | None = await storage(service.finish_change, change_id)
        if change is None:
            raise HTTPException(404, f"no change {change_id!r}; GET /api/v1/changes lists them")
        await service.windows_changed()
        return _shown(change)

    @app.get("/api/v1/changes", responses={503: errors[503]})
    async def list_changes(
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """Declared changes, the newest first, each open or finished."""
        found: list[Change] = await storage(service.changes, limit)
        return {"changes": [_shown(change) for change in found]}

    @app.get("/api/v1/changes/{change_id}", responses={404: errors[404], 503: errors[503]})
    async def show_change(change_id: str) -> dict[str, Any]:
        """One change and its verdict on each configured pair whose target it names: the
        first run after its window and the ``change`` that run carries (``null`` until then)."""
        change: Change | None = await storage(service.change, change_id)
        if change is None:
            raise HTTPException(404, f"no change {change_id!r}; GET /api/v1/changes lists them")
        verdicts: dict[str, list[PairVerdict]] = await storage(service.change_verdicts, [change])
        shown = [v.as_dict() for v in verdicts.get(change.change_id, [])]
        return _shown(change) | {"verdicts": shown}


def _shown(change: Change) -> dict[str, Any]:
    return change.as_dict(datetime.now(UTC))
