"""Converting standard IR test collections (BEIR, TREC) into suite-file cases."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragcanary.errors import ConfigError, Problem

_BEIR_HEADER = ("query-id", "corpus-id", "score")
_TOP_OPEN = re.compile(r"<top>", re.IGNORECASE)
_TOP_CLOSE = re.compile(r"</top>", re.IGNORECASE)
# Classic TREC topic files leave their tags unclosed: a field runs until the next tag.
_FIELD = r"<{tag}>(?P<value>[^<]*)"
_NUM = re.compile(_FIELD.format(tag="num"), re.IGNORECASE)
_TITLE = re.compile(_FIELD.format(tag="title"), re.IGNORECASE)
_NUM_PREFIX = re.compile(r"^\s*number\s*:", re.IGNORECASE)
_TITLE_PREFIX = re.compile(r"^\s*topic\s*:", re.IGNORECASE)

Judgements = dict[str, dict[str, int]]  # query id -> doc id -> grade, in file order


@dataclass(frozen=True)
class Imported:
    """Suite cases converted from a collection, and the queries left out of them.

    Each case is ``{"id": str, "query": str, "relevant": {doc_id: grade}}`` with
    only positive grades kept (the suite format's graded map). ``skipped`` counts
    the queries that had no positively judged document: they cannot be scored,
    and turning them into negative canaries would claim something the
    collection never judged.
    """

    cases: list[dict[str, Any]]
    skipped: int


def read_beir(directory: Path, split: str = "test") -> Imported:
    """Read a BEIR dataset directory: ``queries.jsonl`` and ``qrels/<split>.tsv``.

    Only the queries judged in the split are imported, in ``queries.jsonl`` order.
    Raises ``ConfigError`` naming file and line for anything malformed, and for
    a judged query id that ``queries.jsonl`` does not contain.
    """
    queries_path = directory / "queries.jsonl"
    qrels_path = directory / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = sorted(p.stem for p in (directory / "qrels").glob("*.tsv"))
        fix = (
            f"choose one of the splits {', '.join(available)}"
            if available
            else "point to a BEIR dataset directory (queries.jsonl, qrels/test.tsv)"
        )
        raise _error(qrels_path, f'there is no qrels file for split "{split}"', fix)
    queries = _read_beir_queries(queries_path)
    judgements, first_lines = _read_beir_qrels(qrels_path)
    for qid, line in first_lines.items():
        if qid not in queries:
            raise _error(
                qrels_path,
                f'query id "{qid}" is judged but missing from {queries_path.name}',
                "use the qrels and queries of the same dataset",
                line,
            )
    ordered = {qid: text for qid, text in queries.items() if qid in judgements}
    return _cases(ordered, judgements)


def read_trec(qrels: Path, topics: Path) -> Imported:
    """Read a TREC qrels file and its topics (classic ``<top>`` file, or ``qid<TAB>query`` lines).

    Cases follow the topics file's order and use each topic's title as the
    query. Judged topics absent from the topics file are ignored, because
    qrels files often cover several topic sets. Numeric query ids lose their
    leading zeros, because old topic files say ``Number: 051`` where qrels say ``51``.
    """
    text = _read_text(topics)
    if _TOP_OPEN.search(text):
        queries = _parse_sgml_topics(topics, text)
    else:
        queries = _parse_tsv_topics(topics, text)
    return _cases(queries, _read_trec_qrels(qrels))


def _cases(queries: dict[str, str], judgements: Judgements) -> Imported:
    cases: list[dict[str, Any]] = []
    skipped = 0
    for qid, query in queries.items():
        judged = judgements.get(qid, {})
        if any(grade > 0 for grade in judged.values()):
            # Grade 0 is kept (judged not relevant: what bpref and judged@k count); a negative
            # grade (spam, junk in some TREC tracks) is left out, as a suite has no such grade.
            relevant = {doc: grade for doc, grade in judged.items() if grade >= 0}
            cases.append({"id": qid, "query": query, "relevant": relevant})
        else:
            skipped += 1
    return Imported(cases=cases, skipped=skipped)


def _read_beir_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    fix = 'write one JSON object per line like {"_id": "q1", "text": "the query"}'
    for number, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _error(path, f"the line is not valid JSON ({exc.msg})", fix, number) from exc
        if not isinstance(record, dict):
            raise _error(path, "the line is not a JSON object", fix, number)
        qid, text = record.get("_id"), record.get("text")
        if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid).strip() == "":
            raise _error(path, 'the query has no "_id"', fix, number)
        if not isinstance(text, str) or not text.strip():
            raise _error(path, f'query "{qid}" has no "text"', fix, number)
        _add_query(queries, path, str(qid).strip(), text.strip(), number)
    return queries


def _read_beir_qrels(path: Path) -> tuple[Judgements, dict[str, int]]:
    judgements: Judgements = {}
    first_lines: dict[str, int] = {}
    fix = "write query-id<TAB>corpus-id<TAB>score with an integer score"
    for number, line in _lines(path):
        fields = line.split()
        if tuple(f.lower() for f in fields) == _BEIR_HEADER:
            continue
        if len(fields) != 3:
            raise _error(path, f"expected 3 columns, found {len(fields)}", fix, number)
        qid, doc, grade = fields
        _judge(judgements, path, qid, doc, _grade(path, grade, fix, number), number)
        first_lines.setdefault(qid, number)
    return judgements, first_lines


def _read_trec_qrels(path: Path) -> Judgements:
    judgements: Judgements = {}
    fix = "write one judgement per line as: query-id iteration doc-id relevance"
    for number, line in _lines(path):
        fields = line.split()
        if len(fields) != 4:
            raise _error(path, f"expected 4 columns, found {len(fields)}", fix, number)
        qid, _iteration, doc, grade = fields
        _judge(judgements, path, _trec_qid(qid), doc, _grade(path, grade, fix, number), number)
    return judgements


def _parse_sgml_topics(path: Path, text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    fix = "give every <top> a <num> Number: N and a <title>"
    for opening in _TOP_OPEN.finditer(text):
        line = text.count("\n", 0, opening.start()) + 1
        closing = _TOP_CLOSE.search(text, opening.end())
        following = _TOP_OPEN.search(text, opening.end())
        if closing is None or (following is not None and following.start() < closing.start()):
            raise _error(path, "a <top> is never closed by </top>", fix, line)
        body = text[opening.end() : closing.start()]
        num, title = _NUM.search(body), _TITLE.search(body)
        qid = _trec_qid(_NUM_PREFIX.sub("", num.group("value"))) if num else ""
        if not qid:
            raise _error(path, "a topic has no <num>", fix, line)
        query = " ".join(_TITLE_PREFIX.sub("", title.group("value")).split()) if title else ""
        if not query:
            raise _error(path, f"topic {qid} has no <title>", fix, line)
        _add_query(queries, path, qid, query, line)
    return queries


def _parse_tsv_topics(path: Path, text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    fix = "write one topic per line as query-id<TAB>query, or use a classic <top> topic file"
    for number, line in _numbered(path, text):
        # Tab-separated when there is a tab, so ids may not contain spaces but queries may.
        fields = line.split("\t", 1) if "\t" in line else line.split(None, 1)
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise _error(path, "the line has no query-id and query", fix, number)
        _add_query(queries, path, _trec_qid(fields[0]), " ".join(fields[1].split()), number)
    return queries


def _trec_qid(text: str) -> str:
    qid = text.strip()
    return str(int(qid)) if qid.isascii() and qid.isdigit() else qid


def _add_query(queries: dict[str, str], path: Path, qid: str, text: str, line: int) -> None:
    if qid in queries:
        raise _error(path, f'query id "{qid}" appears twice', "give every query its own id", line)
    queries[qid] = text


def _judge(judgements: Judgements, path: Path, qid: str, doc: str, grade: int, line: int) -> None:
    docs = judgements.setdefault(qid, {})
    if docs.get(doc, grade) != grade:
        raise _error(
            path,
            f'doc "{doc}" of query "{qid}" is judged {docs[doc]} and again {grade}',
            "keep one judgement per query and document",
            line,
        )
    docs[doc] = grade


def _grade(path: Path, text: str, fix: str, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise _error(path, f'relevance "{text}" is not an integer', fix, line) from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    return _numbered(path, _read_text(path))


def _numbered(path: Path, text: str) -> Iterator[tuple[int, str]]:
    # Only "\n" ends a line, so line numbers match what editors and `sed -n` show.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise _error(path, f"cannot read the file ({reason})", "check the path") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _error(path, "the file is not UTF-8", "convert it to UTF-8", line) from exc


def _error(path: Path, message: str, fix: str, line: int | None = None) -> ConfigError:
    return ConfigError([Problem(file=str(path), path="", message=message, fix=fix, line=line)])
