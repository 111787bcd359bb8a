"""The /ui/ routes: each gathers what its page shows (storage in a thread) and renders it.

Every page is read-only; the one write is the baseline form, guarded by the admin token like
``POST /api/v1/baselines/...`` (it travels in the form's body, since a plain HTML form cannot
send an ``Authorization`` header, and is never stored or shown).
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs, quote, urlencode

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from ragcanary.serve.http.guard import credentials_match
from ragcanary.serve.http.ui import apidocs, candidatespage, runbookpage, runpage, stalepage, views
from ragcanary.serve.http.ui import pinned as pin_notice
from ragcanary.serve.http.ui.render import environment
from ragcanary.store.errors import StorageError
from ragcanary.threads import run_in

if TYPE_CHECKING:
    from ragcanary.serve.service import Service

# What a page may load and do: its own scripts, styles and forms only, never framed.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-cache",
}
REALM = "ragcanary candidates"  # what the browser names when it asks for the token
FORM_BYTES = 16_384  # the baseline form is a few hundred bytes
JUDGMENTS_SHOWN = 200  # the newest judgments a run or case page lists


def add_pages(app: FastAPI, service: Service) -> None:
    """Mount the pages, their assets and the redirect from ``/`` on ``app``."""
    templates = environment()
    memos = views.Memos()
    app.mount(
        "/ui/static",
        StaticFiles(packages=[("ragcanary.serve.http.ui", "static")]),
        name="ui-static",
    )

    def html(name: str, status: int = 200, **context: Any) -> Response:
        body = templates.get_template(name).render(**context)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    async def page(build: Callable[[], Response]) -> Response:
        """Build a page in a thread (storage and rendering block); errors become pages too."""
        try:
            return await run_in(None, build)
        except views.PageError as error:
            return html(
                "error.html",
                error.status,
                page="error",
                heading=error.heading,
                message=error.message,
                hint=error.hint,
                tone="bad",
            )
        except StorageError as error:
            return html(
                "error.html",
                503,
                page="error",
                heading="Storage is unreachable",
                message=str(error),
                hint="The daemon keeps running and buffering runs; reload this page later.",
                tone="bad",
            )

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/docs", include_in_schema=False)
    async def api_docs() -> Response:
        rows = apidocs.operations(app.openapi())
        return await page(lambda: html("apidocs.html", page="api", operations=rows))

    @app.get("/ui/runbooks/", include_in_schema=False)
    @app.get("/ui/runbooks/{name}", include_in_schema=False)
    async def runbook(name: str | None = None) -> Response:
        """An alert's runbook (its ``runbook_url``), or the index of them all."""

        def shown() -> Response:
            found = runbookpage.page(name)
            if found is None:
                raise views.PageError(
                    404,
                    "No such runbook",
                    f"No alert of this version of ragcanary is called {name}.",
                    "Every runbook is listed at /ui/runbooks/.",
                )
            return html("runbook.html", page="runbooks", **found)

        return await page(shown)

    @app.get("/ui", include_in_schema=False)
    async def ui_bare() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    async def shown(name: str, gather: Callable[[], Awaitable[dict[str, Any]]]) -> Response:
        """A page whose content is gathered by a coroutine (it asks targets, not only storage);
        its errors become pages as ``page``'s do."""
        try:
            context = await gather()
        except (views.PageError, StorageError) as error:
            failed = error
            return await page(lambda: _raise(failed))
        return await run_in(None, lambda: html(name, **context))

    @app.get("/ui/", include_in_schema=False)
    async def fleet_page(suite: str | None = None, target: str | None = None) -> Response:
        return await page(lambda: html("fleet.html", **views.fleet(service, memos, suite, target)))

    @app.get("/ui/latest", include_in_schema=False)
    async def latest(
        suite: str, target: str, at: float | None = Query(None, ge=0, le=1e14)
    ) -> Response:
        """The page of a pair's newest run, or of its run at ``at`` (milliseconds since the
        epoch, as Grafana's ``${__value.time}``): what alerts and dashboards link to."""

        def newest() -> Response:
            if at is None:
                found = service.latest_run(suite, target, exclude_unavailable=False)
                run_id = None if found is None else str(found["run_id"])
            else:
                moment = datetime.fromtimestamp(at / 1000, UTC)
                run_id = service.run_at(suite, target, moment)
            if run_id is None:
                raise _no_runs(suite, target)
            return RedirectResponse(f"/ui/runs/{quote(run_id)}", status_code=307)

        return await page(newest)

    @app.get("/ui/runs/{run_id}", include_in_schema=False)
    async def run_page(
        run_id: str,
        tag: str | None = None,
        outcome: str | None = None,
        sort: str = "severity",
        dir: Literal["asc", "desc"] | None = None,
        page_no: int = Query(1, alias="page", ge=1, le=10_000),
    ) -> Response:
        key = sort if sort in runpage.SORT_KEYS else "severity"

        def build() -> Response:
            shown = views.run(service, run_id, tag, outcome, key, dir, page_no)
            judged = service.judgments(None, run_id=shown["report"].run_id, limit=JUDGMENTS_SHOWN)
            return html("run.html", **shown, judgments=judged)

        return await page(build)

    @app.get("/ui/diff", include_in_schema=False)
    async def diff_page(
        suite: str,
        target: str,
        from_: str | None = Query(None, alias="from"),
        to: str | None = None,
        page_no: int = Query(1, alias="page", ge=1, le=10_000),
    ) -> Response:
        return await page(
            lambda: html("diff.html", **views.diff(service, suite, target, from_, to, page_no))
        )

    @app.get("/ui/case", include_in_schema=False)
    async def case_page(
        suite: str,
        case: str,
        target: str | None = None,
        since: Literal["1d", "7d", "30d"] = "7d",
    ) -> Response:
        def build() -> Response:
            shown = views.case(service, suite, case, target, since)
            judged = service.judgments(None, suite=suite, case_id=case, limit=JUDGMENTS_SHOWN)
            return html("case.html", **shown, judgments=judged)

        return await page(build)

    def locked(request: Request) -> Response | None:
        """The page that stands in for the candidates' without the admin token: they hold
        what users asked, as ``GET /api/v1/candidates`` does, which needs the same token."""
        token = service.loaded.config.admin_token
        if token and credentials_match(request.headers.get("authorization"), token):
            return None
        hint = "Sign in with any user name and RAGCANARY_ADMIN_TOKEN as the password."
        if not token:
            hint = (
                "Set RAGCANARY_ADMIN_TOKEN for the daemon, then sign in with any user name "
                "and the token as the password."
            )
        response = html(
            "error.html",
            401 if token else 403,
            page="error",
            heading="The candidates need the admin token",
            message="Failure reports hold what users asked, so only holders of the admin "
            "token see them.",
            hint=hint,
            tone="bad",
        )
        if token:
            response.headers["www-authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
        return response

    @app.get("/ui/candidates", include_in_schema=False)
    async def candidates_page(
        request: Request,
        signal: str | None = None,
        page_no: int = Query(1, alias="page", ge=1, le=10_000),
    ) -> Response:
        if (refused := locked(request)) is not None:
            return refused

        async def gather() -> dict[str, Any]:
            listed = await run_in(None, candidatespage.listing, service, signal or None, page_no)
            listed["rows"] = await candidatespage.with_live(service, listed["rows"])
            return listed

        return await shown("candidates.html", gather)

    @app.get("/ui/candidates/{candidate_id}", include_in_schema=False)
    async def candidate_page(
        request: Request, candidate_id: int = Path(ge=1, le=2**62)
    ) -> Response:
        if (refused := locked(request)) is not None:
            return refused

        async def gather() -> dict[str, Any]:
            found = await run_in(None, candidatespage.one, service, candidate_id)
            (found["candidate"],) = await candidatespage.with_live(service, [found["candidate"]])
            return found

        return await shown("candidate.html", gather)

    @app.get("/ui/stale-labels", include_in_schema=False)
    async def stale_page(suite: str | None = None, target: str | None = None) -> Response:
        return await page(lambda: html("stale.html", **stalepage.page(service, suite, target)))

    @app.get("/ui/baselines", include_in_schema=False)
    async def baselines_page(
        suite: str | None = None,
        target: str | None = None,
        run: str | None = None,
        pinned: str | None = None,
        at: str | None = None,
        proof: str | None = None,
    ) -> Response:
        # Only the redirect of a pin that happened proves it; a link anyone writes does not.
        said = {"suite": suite, "target": target, "pinned": pinned, "at": at, "proof": proof}
        given = {key: value for key, value in said.items() if value is not None}
        notice = pin_notice.notice(service.loaded.config.admin_token, given, time.time())
        return await page(
            lambda: html(
                "baselines.html",
                **views.baselines(service, suite, target, run),
                notice=notice,
                notice_tone="good",
            )
        )

    @app.post("/ui/baselines", include_in_schema=False)
    async def pin(request: Request) -> Response:
        """The pin form: the admin token checked before anything else of the form is used."""
        admin = service.loaded.config.admin_token
        if not admin:
            return await page(
                lambda: _raise(
                    views.PageError(
                        403,
                        "Pinning is turned off",
                        "The daemon has no admin token, so nothing can be pinned here.",
                        "Set RAGCANARY_ADMIN_TOKEN in the daemon's environment and restart it.",
                    )
                )
            )
        if request.headers.get("content-type", "").split(";")[0].strip() != (
            "application/x-www-form-urlencoded"
        ):
            return Response("send the form as application/x-www-form-urlencoded", 415)
        raw = await request.body()
        if len(raw) > FORM_BYTES:
            return Response("the form is too large", 413)
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        given = form.get("token", "")
        if not hmac.compare_digest(given.encode(), admin.encode()):
            return await page(
                lambda: html(
                    "baselines.html",
                    401,
                    **views.baselines(service, None, None, None),
                    notice="Wrong admin token: nothing was pinned. Enter the value of "
                    "RAGCANARY_ADMIN_TOKEN that the daemon runs with.",
                    notice_tone="bad",
                )
            )
        suite, target = _pair(form.get("pair", ""))
        run_id = form.get("run_id") or None
        try:
            pinned = await _pin(service, suite, target, run_id)
        except (views.PageError, StorageError) as error:
            failed = error
            return await page(lambda: _raise(failed))
        query = pin_notice.redirect_query(admin, suite, target, pinned, time.time())
        return RedirectResponse(f"/ui/baselines?{urlencode(query)}", status_code=303)


def _raise(error: Exception) -> Response:
    raise error


def _pair(value: str) -> tuple[str, str]:
    """The suite and target of the form's pair field (a JSON array of the two names)."""
    try:
        pair = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep to decode
        return "", ""
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
        return pair[0], pair[1]
    return "", ""


def _no_runs(suite: str, target: str) -> views.PageError:
    return views.PageError(
        404,
        "No runs yet",
        f"No run of suite {suite} on target {target} is stored.",
        "The pair runs on its schedule; see the fleet page for when.",
    )


async def _pin(service: Service, suite: str, target: str, run_id: str | None) -> str:
    suites = service.loaded.config.suites
    if suite not in suites or target not in suites[suite].targets:
        raise views.PageError(404, "Unknown pair", f"Suite {suite} has no target {target}.")
    if run_id is None:
        latest = await run_in(None, service.latest_run, suite, target, outcome="ok")
        if latest is None:
            raise views.PageError(
                404, "Nothing to pin", f"No successful run of {suite} on {target}."
            )
        run_id = str(latest["run_id"])
    heads = await run_in(None, service.run_heads, [run_id])
    head = heads.get(run_id)
    if head is None or head.pair != (suite, target):
        raise views.PageError(404, "Unknown run", f"No run {run_id} of suite {suite} on {target}.")
    await service.set_baseline(suite, target, run_id)
    return run_id
