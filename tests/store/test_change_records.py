"""A change request is checked field by field, each refusal naming its field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from ragcanary.store.change_records import ChangeProblem, change_request

TARGETS = ("docs-search", "kb")
GOOD = {"kind": "reindex", "description": "rebuild", "targets": ["kb"], "window": "30m"}


def test_a_good_request_reads_into_seconds() -> None:
    request = change_request(GOOD, TARGETS)
    assert (request.kind, request.targets, request.window_s) == ("reindex", ("kb",), 1800.0)
    assert change_request({**GOOD, "window": "48h", "max": True}, TARGETS).window_s == 172800.0
    defaulted = {k: v for k, v in GOOD.items() if k != "window"}
    assert change_request(defaulted, TARGETS).window_s == 3600.0


@pytest.mark.parametrize(
    ("changed", "field", "says", "status"),
    [
        ({"kind": "migration"}, "kind", "one of reindex, embedding_model, config, deploy", 422),
        ({"description": " "}, "description", "non-empty", 422),
        ({"description": "a\x00b"}, "description", "without NUL", 422),
        ({"targets": []}, "targets", "list the names", 422),
        ({"targets": "kb"}, "targets", "list the names", 422),
        ({"targets": ["kb", "nope"]}, "targets[1]", "'nope' is no target of the config", 404),
        ({"window": "soon"}, "window", "write it like 30m", 422),
        ({"window": "25h"}, "window", "longer than 24h", 409),
        ({"window": "31d", "max": True}, "window", "longer than 30d", 422),
        ({"window": "500ms"}, "window", "shorter than a second", 422),
        ({"max": "yes"}, "max", "true or false", 422),
        ({"until": "tomorrow"}, "until", "not a field of a change", 422),
    ],
)
def test_a_wrong_field_is_named_with_what_to_write(
    changed: dict[str, Any], field: str, says: str, status: int
) -> None:
    with pytest.raises(ChangeProblem) as refused:
        change_request({**GOOD, **changed}, TARGETS)
    assert refused.value.field == field
    assert refused.value.status == status
    assert says in str(refused.value)
    assert str(refused.value).startswith(f"{field}: ")


def test_a_body_that_is_no_object_is_refused() -> None:
    with pytest.raises(ChangeProblem, match="must be a JSON object"):
        change_request(["reindex"], TARGETS)
