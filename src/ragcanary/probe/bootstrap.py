"""Drafting a suite from live results (``ragcanary bootstrap``) for a person to label."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import yaml

from ragcanary.errors import ConfigError, Problem, UsageError
from ragcanary.measure.cases import Case, Suite
from ragcanary.measure.results import CaseResult
from ragcanary.probe.runner import Embed, run_suite
from ragcanary.probe.target import Target

MAX_SLUG_LENGTH = 48
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def read_queries(path: Path) -> list[str]:
    """The queries in ``path``: one a line, or in ``.jsonl`` a ``query`` or ``text`` field a line.

    Blank lines of a text file come back as ``""`` so that ``draft_suite`` counts them among
    the skipped; in ``.jsonl`` they are no record. Raises ``UsageError`` if the file cannot be
    read or holds no query, and ``ConfigError`` naming every bad ``.jsonl`` line.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read queries from {path}: {exc}") from exc
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    if path.suffix.lower() == ".jsonl":
        queries, problems = _jsonl_queries(str(path), [(n, line) for n, line in lines if line])
        if problems:
            raise ConfigError(problems)
    else:
        queries = [line for _, line in lines]
    if not any(queries):
        raise UsageError(f"{path} holds no queries; write one query per line")
    return queries


def _jsonl_queries(file: str, lines: list[tuple[int, str]]) -> tuple[list[str], list[Problem]]:
    queries: list[str] = []
    problems: list[Problem] = []
    fix = 'write one JSON object per line, like {"query": "how do I reset my password"}'
    for number, line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            problems.append(Problem(file, "", "this line is not JSON", fix, number))
            continue
        query = record.get("query", record.get("text")) if isinstance(record, dict) else None
        if not isinstance(query, str) or not query.strip():
            problems.append(Problem(file, "query", "no non-empty query or text field", fix, number))
            continue
        queries.append(query.strip())
    return queries, problems


def slugify(text: str) -> str:
    """A short, lowercase, dash-separated ASCII id for ``text`` (``"case"`` if nothing is left)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_SLUG.sub("-", ascii_text.lower()).strip("-")
    if len(slug) > MAX_SLUG_LENGTH:
        # Cut at a word boundary so ids stay readable; one endless word is cut hard.
        window = slug[: MAX_SLUG_LENGTH + 1]
        slug = window.rsplit("-", 1)[0] if "-" in window else window[:MAX_SLUG_LENGTH]
    return slug or "case"


def unique_slugs(texts: Sequence[str]) -> list[str]:
    """One slug per text, made unique in order by suffixes ``-2``, ``-3``..."""
    taken: set[str] = set()
    slugs = []
    for text in texts:
        base = slugify(text)
        slug, n = base, 1
        while slug in taken:
            n += 1
            slug = f"{base}-{n}"
        taken.add(slug)
        slugs.append(slug)
    return slugs


async def draft_suite(
    target: Target,
    queries: Sequence[str],
    depth: int,
    concurrency: int = 4,
    embed: Embed | None = None,
) -> str:
    """YAML text of a label-free suite for ``queries``, with the live top ``depth`` as comments.

    The draft loads as-is (cases without ``relevant`` are watched for drift only); a
    person turns a case into a quality canary by adding ``relevant:`` from the comments.
    """
    unique = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    cases = tuple(
        Case(id=slug, query=q) for slug, q in zip(unique_slugs(unique), unique, strict=True)
    )
    run = await run_suite(
        "bootstrap",
        Suite(cases),
        target,
        depth=depth,
        concurrency=concurrency,
        rate_limit=None,
        embed=embed,
    )
    return render_draft(target.name, depth, run.results, skipped=len(queries) - len(unique))


def render_draft(
    target_name: str, depth: int, results: Sequence[CaseResult], *, skipped: int = 0
) -> str:
    """The draft suite text for already collected results (pure; see ``draft_suite``)."""
    answered = sum(r.answer.answered for r in results)
    lines = [
        f"# Draft suite from the live top {depth} of target {_one_line(target_name)}.",
        f"# {len(results)} queries, {answered} answered.",
        "# To make a case a quality canary, add  relevant: [id, ...]  (or a map id -> grade)",
        "# from the results listed under it; relevant: [] makes it a negative canary.",
        "# Cases left without relevant are watched for drift only.",
    ]
    if skipped:
        lines.append(f"# {skipped} blank or repeated queries were skipped.")
    lines.append("cases:")
    for result in results:
        lines.extend(_render_case(result))
    return "\n".join(lines) + "\n"


def _render_case(result: CaseResult) -> list[str]:
    case, answer = result.case, result.answer
    # PyYAML mangles unusual line breaks (U+0085) when writing unicode as-is, so a query with
    # any unprintable character is written with escapes instead.
    readable = all(ch.isprintable() or ch in "\t\n" for ch in case.query)
    entry = yaml.safe_dump(
        [{"id": case.id, "query": case.query}],
        allow_unicode=readable,
        sort_keys=False,
        width=1_000_000,
    )
    lines = ["  " + line if line else line for line in entry.splitlines()]
    if not answer.answered:
        lines.append(f"    # query failed ({answer.outcome}): {_one_line(answer.error or '')}")
        lines.append("    # no live results to label from; re-run bootstrap or label by hand")
    elif not answer.ids:
        lines.append("    # the target returned no results (a negative canary?)")
    else:
        lines.append("    # live results (rank. id  score):")
        for rank, (doc_id, score) in enumerate(zip(answer.ids, answer.scores, strict=True), 1):
            shown = "-" if score is None else f"{score:.4g}"
            lines.append(f"    #   {rank:>2}. {_one_line(doc_id)}  {shown}")
    return lines


def _one_line(text: str) -> str:
    """``text`` safe inside a YAML comment: quoted when it holds line breaks or control chars."""
    if text and all(ch.isprintable() for ch in text):
        return text
    return json.dumps(text)
