"""A run whose answers came back but that the configured response paths read nothing from."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ragcanary.measure.results import PathField, RunResult

_KEYS_SHOWN = 20
_FIX: dict[PathField, str] = {
    "results": "set results to the JMESPath of the list of hits in an answer, like hits or "
    "data.matches",
    "id": "set id to the JMESPath of the document id inside a hit, like id or metadata.doc_id",
    "score": "set score to the JMESPath of the score inside a hit, or to null if the target "
    "returns none",
}
_IN: dict[PathField, str] = {"results": "the", "id": "the hits of the", "score": "the hits of the"}


@dataclass(frozen=True)
class Misread:
    """The target answered, but a path of its config fits none of the answers: a config error.

    ``field`` is ``results``, ``id`` or ``score`` of ``targets.TARGET``; ``keys`` are those the
    answers (for ``results``) or their hits held instead.
    """

    target: str
    field: PathField
    path: str
    answers: int
    keys: tuple[str, ...]

    @property
    def where(self) -> str:
        """The field's path in the config file, e.g. ``targets.docs.results``."""
        return f"targets.{self.target}.{self.field}"

    @property
    def message(self) -> str:
        plural = "answer that came back" if self.answers == 1 else "answers that came back"
        verb = "holds" if self.answers == 1 and self.field == "results" else "hold"
        held = f"the keys {', '.join(self.keys)}" if self.keys else "no keys (no JSON objects)"
        return (
            f"{self.path!r} matched nothing in {_IN[self.field]} {self.answers} {plural} "
            f"(HTTP 2xx); {'it' if verb == 'holds' else 'they'} {verb} {held}"
        )

    @property
    def fix(self) -> str:
        return f"{_FIX[self.field]}; `ragcanary validate --live` prints an answer's first hits"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}; {self.fix}"


def misread(run: RunResult) -> Misread | None:
    """Why no answer of ``run`` could be read, when that is its config's fault; else None.

    It is when no case was read (none came back ``ok``) and at least one answer came back as
    JSON that a configured path found nothing in: those answers prove the target is up. The
    path named is the one that missed in most answers; the keys are every key they held, in
    the order they first appeared.
    """
    if any(result.answer.outcome == "ok" for result in run.results):
        return None
    misses = [r.answer.miss for r in run.results if r.answer.miss is not None]
    if not misses:
        return None
    (field, path), count = Counter((m.field, m.path) for m in misses).most_common(1)[0]
    keys = dict.fromkeys(k for m in misses if (m.field, m.path) == (field, path) for k in m.keys)
    return Misread(run.target, field, path, count, tuple(keys)[:_KEYS_SHOWN])
