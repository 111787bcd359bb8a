"""Vespa's query API: ``POST /search/`` with YQL, a nearestNeighbor search or userQuery().

With ``embedding:`` the YQL is ``{targetHits:k}nearestNeighbor(vector_field, q)`` and the
vector goes as ``input.query(q)``; without, it is ``userQuery()`` with the canary as the
``query`` parameter, never inside the YQL. Hits are ``root.children[]``: ``id`` is Vespa's
(``id:namespace:doctype::docid``, the default here), ``id: fields.doc_id`` reads a summary
field, and ``relevance`` is higher for better hits. Errors come as ``root.errors``: with an
HTTP error status when nothing was found, and in a 200 beside the hits that were. Relevant
ids are looked up one by one in ``/document/v1``, whose path Vespa's own id spells out. For
the diagnosis, the same nearestNeighbor with ``approximate: false``, restricted to the lost ids
of a ``fields.X`` target, gives their exact relevance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from ragcanary.config.presets import NAME
from ragcanary.config.target import TargetConfig
from ragcanary.measure.results import Answer, Outcome
from ragcanary.probe.presets.lookup import best_by_filter, scalar, score_of
from ragcanary.probe.retries import QueryFailed
from ragcanary.probe.target import HttpTarget

# Vespa's error codes (com.yahoo.container.protect.Error) that retrying may cure: no
# backends in service, backend communication error, timeout. Others are the query's fault.
TRANSIENT_ERRORS: dict[int, Outcome] = {0: "http_5xx", 10: "http_5xx", 12: "timeout"}
# Hits per exact search: Vespa's default maxHits, the most a query may ask for unconfigured.
EXACT_HITS = 400


class VespaTarget(HttpTarget):
    """A Vespa application's container; ``collection:`` names the sources (default all)."""

    SHAPE: ClassVar[Mapping[str, Any]] = {
        "method": "POST",
        "results": "root.children",
        "score": "relevance",
    }
    AUTH_HINT: ClassVar[str] = (
        'Vespa Cloud takes a data-plane token as headers: {Authorization: "Bearer ${VESPA_TOKEN}"}'
    )

    def _setup(self, config: TargetConfig) -> None:
        self._results = self._hits
        self._base = config.url.rstrip("/")
        self._url = f"{self._base}/search/"
        # Checked names (config/presets.py): safe to write into the YQL.
        self._from = f"select * from sources {config.collection or '*'} where"

    async def search(self, query: str, k: int, vector: Sequence[float] | None = None) -> Answer:
        """The top ``k``: nearest to ``vector`` with an embedding, else by userQuery()."""
        if self._config.embedding is not None and vector is None:
            reason = "the vespa nearestNeighbor search needs the query's vector"
            return Answer((), (), 0.0, "bad_response", reason)
        return await super().search(query, k, vector)

    def _request(self, query: str, k: int, vector: Sequence[float] | None) -> httpx.Request:
        config = self._config
        body: dict[str, Any]
        if vector is None:
            body = {"yql": f"{self._from} userQuery()", "query": query, "hits": k}
            if config.text_field is not None:
                body["model.defaultIndex"] = config.text_field
        else:
            tensor = config.query_tensor
            body = {
                "yql": f"{self._from} {{targetHits:{k}}}"
                f"nearestNeighbor({config.vector_field}, {tensor})",
                f"input.query({tensor})": list(vector),
                "hits": k,
            }
        if config.rank_profile is not None:
            body["ranking"] = config.rank_profile
        return self._client.build_request(
            "POST",
            self._url,
            json=body,
            headers=self._headers,
        )

    async def _missing(self, ids: list[str]) -> set[str] | None:
        """``GET /document/v1/{namespace}/{doctype}/docid/{id}`` per id, read from Vespa's own
        ``id:namespace:doctype::docid``; a summary field (``fields.X``) cannot be looked up."""
        if self._config.id != "id":
            return None
        missing = set()
        for doc_id in ids:
            path = _document_path(doc_id)
            if path is None:
                continue  # not a document id (an index:... hit id): cannot tell
            request = self._client.build_request(
                "GET",
                f"{self._base}/document/v1/{path}",
                params={"fieldSet": "[id]"},
                headers=self._headers,
            )
            status, got = await self._ask(request, accept=(404,))
            if status == 404:
                # The document API's own "not found" names the path; any other 404 (no such
                # API behind this URL) says nothing of the document.
                if not isinstance(got, dict) or "pathId" not in got:
                    raise QueryFailed("http_4xx", "/document/v1 is not served at this url")
                missing.add(doc_id)
        return missing

    async def _scores(self, ids: list[str], vector: list[float]) -> dict[str, float] | None:
        """The canary's nearestNeighbor with ``approximate: false``, restricted to ``ids`` by
        ``X in (...)`` on the summary field ``fields.X`` (a string attribute), ranked by the
        same rank profile: each id's first hit is its exact relevance. Vespa's own document id
        cannot be filtered on in YQL: such a target cannot tell."""
        config = self._config
        field = config.id.removeprefix("fields.")
        if config.embedding is None or config.vector_field is None:
            return None  # a text search: no vector to score by
        if field == config.id or not NAME.fullmatch(field):
            return None
        tensor = config.query_tensor
        nearest = (
            f"({{targetHits:{EXACT_HITS}, approximate:false}}"
            f"nearestNeighbor({config.vector_field}, {tensor}))"
        )

        async def page(batch: list[str]) -> tuple[list[tuple[str, float]], bool]:
            values = ", ".join(_yql_string(doc_id) for doc_id in batch)
            body: dict[str, Any] = {
                "yql": f"{self._from} {nearest} and {field} in ({values})",
                f"input.query({tensor})": vector,
                "hits": EXACT_HITS,
            }
            if config.rank_profile is not None:
                body["ranking"] = config.rank_profile
            request = self._client.build_request(
                "POST", self._url, json=body, headers=self._headers
            )
            _, got = await self._ask(request)
            hits = self._hits(got)
            if not isinstance(hits, list):
                raise QueryFailed("bad_response", "vespa's exact search answered no children")
            ranked = []
            for hit in hits:
                doc = scalar(self._id(hit))
                if doc is not None:
                    ranked.append((doc, score_of(hit.get("relevance"))))
            return ranked, len(hits) < EXACT_HITS

        # An id with a control or separator character is not written into YQL: not asked.
        asked = [doc_id for doc_id in ids if doc_id.isprintable()]
        return await best_by_filter(asked, page)

    def _hits(self, document: Any) -> Any:
        """``root.children``, none when nothing matched; or the errors Vespa reported."""
        root = document.get("root") if isinstance(document, dict) else None
        if not isinstance(root, dict):
            raise QueryFailed("bad_response", "vespa answered without a root object")
        if root.get("errors"):
            raise QueryFailed(*self._explain(root["errors"]))
        return root.get("children", [])

    def _error_message(self, code: int, error: Any) -> str | None:
        root = error.get("root") if isinstance(error, dict) else None
        errors = root.get("errors") if isinstance(root, dict) else None
        return self._explain(errors)[1] if errors else None

    def _explain(self, errors: Any) -> tuple[Outcome, str]:
        """The outcome and message of Vespa's first error, with the fix of a known one."""
        first = errors[0] if isinstance(errors, list) else errors
        if not isinstance(first, dict):
            return "bad_response", f"vespa error: {str(first)[:300]}"
        code = first.get("code")
        message = " ".join(str(first.get("message", "")).split())[:300]
        text = f"vespa error {code} ({first.get('summary', '')}): {message}"
        tensor = f"query({self._config.query_tensor})"
        if self._config.embedding is not None and tensor in message:
            text += (
                f"; the rank profile must declare the input {tensor} of the embedding's type:"
                " set rank_profile: to one that does"
            )
        outcome = TRANSIENT_ERRORS.get(code) if isinstance(code, int) else None
        return outcome or "bad_response", text


def _yql_string(text: str) -> str:
    """A YQL string literal: quotes and backslashes escaped by a backslash."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _document_path(doc_id: str) -> str | None:
    """The /document/v1 path of ``id:namespace:doctype:[n=N|g=G]:docid``; None if not one."""
    parts = doc_id.split(":", 4)
    if len(parts) != 5 or parts[0] != "id" or not parts[1] or not parts[2] or not parts[4]:
        return None
    _, namespace, doctype, where, user = (quote(part, safe="") for part in parts)
    if not where:
        return f"{namespace}/{doctype}/docid/{user}"
    key, _, value = parts[3].partition("=")
    if key not in ("n", "g") or not value:
        return None
    kind = "number" if key == "n" else "group"
    return f"{namespace}/{doctype}/{kind}/{quote(value, safe='')}/{user}"
