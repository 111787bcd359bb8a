"""The /docs page: every operation of /openapi.json, rendered here so it needs no CDN.

FastAPI's own /docs and /redoc load Swagger UI and ReDoc from a CDN, so they are blank
offline and break the pages' content security policy; this page lists the same schema with
the pages' own template and links the schema itself for any OpenAPI viewer or client.
"""

from __future__ import annotations

from typing import Any

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per operation of an OpenAPI ``schema``, in the schema's order."""
    rows = []
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            description = str(operation.get("description") or "").strip()
            parameters = [
                {"name": p["name"], "where": p.get("in", ""), "required": p.get("required", False)}
                for p in operation.get("parameters", [])
                if p.get("name", "").lower() != "authorization"  # shown as the token it needs
            ]
            responses = operation.get("responses", {})
            rows.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "summary": operation.get("summary", ""),
                    "description": " ".join(description.split()),
                    "parameters": parameters,
                    "body": "requestBody" in operation,
                    "token": "401" in responses,
                    "statuses": sorted(responses),
                }
            )
    return rows
