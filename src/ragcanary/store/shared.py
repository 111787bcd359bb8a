"""Values runs share, stored once and referred to by number: rankings and run-level parts.

A canary that answers as in an earlier run of its pair refers to the ranking stored then,
so a run whose rankings did not change adds a few numbers per canary (its ``answers`` rows),
not its ids, scores and metrics again: docs/performance.md, "Storage: bytes per canary-run".

A value is stored as its compact JSON text (``JSON_ENCODER``), compressed; it is found again
by the 16-byte BLAKE2b digest of that text, so two values are the same exactly when their
bytes are (a score that moved in its last digit is a new ranking; nothing is compared with a
tolerance). A run reuses only values first stored within ``REUSE`` of its start: values never
change once written (no row is ever updated), and one first stored before the retention
window less ``REUSE`` can only be referred to by runs older than the window, which is what
lets ``store.pruning`` delete it without counting references.
"""

from __future__ import annotations

import hashlib
import json
import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Column, Connection, Table, delete, insert, select

from ragcanary.measure.case_verdict import CaseVerdict, case_verdict
from ragcanary.store.engine import among, insert_for
from ragcanary.store.schema import JSON_ENCODER, cases, run_keys, run_numbers

# Keys of a report's head stored as one shared value rather than in runs.report: the largest
# ones, and equal from run to run while the rankings are (metrics per tag, the comparison
# with the baseline). runs.report keeps what the database extracts for summaries (metrics).
SHARED_HEAD_KEYS = ("metrics_by_tag", "baseline")
REUSE = timedelta(days=1)
# A case's verdict in an answers row; fixed numbers, whatever order CASE_VERDICTS lists.
VERDICT_CODES: Mapping[CaseVerdict, int] = {
    "ok": 0,
    "regressed": 1,
    "leaked": 2,
    "missed_min_score": 3,
    "unanswered": 4,
}
VERDICTS: Mapping[int, CaseVerdict] = {code: verdict for verdict, code in VERDICT_CODES.items()}
_MAX_US = 2**31 - 1  # an Integer column's largest value: 35 minutes, longer than any timeout
BATCH = 500  # values looked up or written per statement (SQLite's bound parameters are few)

# The first byte of a stored body: how the rest is encoded. A body once written is read back
# forever, so a new encoding gets a new number and these stay readable.
_ZLIB_V1 = 1  # zlib with the preset dictionary _ZDICT_V1
_ZLIB_AGAINST = 2  # zlib with the text of the ranking the row's dict_key names as dictionary
# zlib's preset dictionary for _ZLIB_V1: the keys and values every case entry and report head
# repeats, so even a short value compresses (zlib looks back into it as into earlier text).
# Never change it: bodies written with it are only readable with it.
_ZDICT_V1 = "".join(
    (
        '"embedding_cosine":1.0,"lost":[{"id":"","why":"outranked"},{"why":"not_in_index"}',
        '"p_values":{"ci":{"deltas":{"run_id":"","passed":true,"failed":false,',
        '"negative","label_free","timeout","http_5xx","empty","unanswered",',
        '"ap@1":,"ap@3":,"ap@5":,"ap@10":,"ap@20":,"map@1":,"map@5":,"map@10":,"mrr":',
        '"recall@1":,"recall@3":,"recall@5":,"recall@10":,"recall@20":',
        '"precision@1":,"precision@3":,"precision@5":,"precision@10":,"precision@20":',
        '"ndcg@1":,"ndcg@3":,"ndcg@5":,"ndcg@10":,"ndcg@20":0.0,1.0,0.5,',
        '"hit_rate@1":1.0,"hit_rate@3":1.0,"hit_rate@5":1.0,"hit_rate@10":1.0,"hit_rate@20":',
        '"vs_baseline":{"rbo":1.0,"jaccard":1.0,"entered":[],"left":[],"top_score_delta":0.0',
        '{"id":"","query":"","kind":"labelled","outcome":"ok","ids":["","",""],"scores":[0.',
        '],"latency_s":null,"error":null,"metrics":{"hit_rate@1":0.0,"rr":1.0}}',
    )
).encode()


@dataclass(frozen=True)
class Packed:
    """A JSON value as it is stored and found again: its compact text and that text's digest."""

    digest: bytes
    text: bytes


def packed(value: Any) -> Packed:
    """A value's text and digest (ValueError for NaN, infinity, objects JSON cannot hold)."""
    text = JSON_ENCODER.encode(value).encode()
    return Packed(hashlib.blake2b(text, digest_size=16).digest(), text)


def compressed(text: bytes, against: bytes | None = None) -> bytes:
    """The stored body of ``text``: compressed alone (with the preset dictionary of the keys
    every value repeats), or ``against`` the text of an earlier value (a ranking of the same
    canary), which a changed ranking mostly repeats: docs/performance.md, "Storage"."""
    kind, dictionary = (_ZLIB_V1, _ZDICT_V1) if against is None else (_ZLIB_AGAINST, against)
    compressor = zlib.compressobj(
        9, zlib.DEFLATED, zlib.MAX_WBITS, 9, zlib.Z_DEFAULT_STRATEGY, dictionary
    )
    return bytes((kind,)) + compressor.compress(text) + compressor.flush()


def decompressed(body: bytes, against: bytes | None = None) -> bytes:
    """The text ``compressed`` made ``body`` of (``against``: the same earlier text)."""
    kind = body[0] if body else None
    if kind == _ZLIB_V1:
        dictionary = _ZDICT_V1
    elif kind == _ZLIB_AGAINST and against is not None:
        dictionary = against
    else:
        raise ValueError(f"a stored value of unknown encoding {body[:1]!r}")
    decompressor = zlib.decompressobj(zlib.MAX_WBITS, dictionary)
    return decompressor.decompress(body[1:]) + decompressor.flush()


def split_latency(entry: Mapping[str, Any]) -> tuple[dict[str, Any], float | None]:
    """A case entry as its ranking (the entry with ``latency_s`` null) and its latency.

    A latency that is not a finite float stays in the ranking, so ``with_latency`` gives the
    entry back exactly either way; so does -0.0, whose sign neither column keeps (SQLite
    stores a float that is whole as an integer).
    """
    latency = entry.get("latency_s")
    if isinstance(latency, float) and math.isfinite(latency) and math.copysign(1.0, latency) > 0:
        return {**entry, "latency_s": None}, latency
    return dict(entry), None


def with_latency(ranking: Mapping[str, Any], latency: float | None) -> dict[str, Any]:
    """The case entry of a ranking and the latency stored beside it (split_latency's inverse);
    a new dict, since one decoded ranking serves many runs."""
    entry = dict(ranking)
    if latency is not None:
        entry["latency_s"] = latency
    return entry


def latency_columns(latency: float | None) -> dict[str, Any]:
    """An answers row's latency columns: whole microseconds where that is exact."""
    if latency is not None and abs(latency) * 1e6 <= _MAX_US:
        micros = round(latency * 1e6)
        if micros / 1e6 == latency:
            return {"latency_us": micros, "latency_s": None}
    return {"latency_us": None, "latency_s": latency}


def latency_of(micros: int | None, seconds: float | None) -> float | None:
    """The latency ``latency_columns`` stored."""
    return micros / 1e6 if micros is not None else seconds


def verdict_code(verdict: CaseVerdict | None, outcome: Any) -> int | None:
    """An answers row's verdict: None for the usual one of ``outcome`` (ok when answered,
    else unanswered), which ``verdict_of`` gives back."""
    if verdict is None or verdict == case_verdict(outcome):
        return None
    return VERDICT_CODES.get(verdict)


def verdict_of(code: int | None, outcome: Any) -> CaseVerdict:
    """The verdict ``verdict_code`` stored for a case of ``outcome``."""
    return case_verdict(outcome) if code is None else VERDICTS[code]


def value_key(table: Table) -> Column[Any]:
    """The key column of a table of shared values (rankings, run_parts)."""
    key: Column[Any] = table.primary_key.columns.values()[0]
    return key


NewRows = Callable[[Sequence[Packed]], list[dict[str, Any]]]


def alone(values: Sequence[Packed]) -> list[dict[str, Any]]:
    """The rows of new values each compressed alone."""
    return [{"body": compressed(value.text)} for value in values]


def shared_keys(
    conn: Connection,
    table: Table,
    values: Sequence[Packed],
    at: datetime,
    new_rows: NewRows = alone,
) -> list[int]:
    """The keys of ``values`` in ``table``, storing those not found (``new_rows`` makes their
    rows but digest and time)."""
    key = value_key(table)
    found: dict[bytes, int] = {}
    wanted = list({value.digest: value for value in values}.values())
    near = (table.c.created_at >= at - REUSE, table.c.created_at <= at + REUSE)
    for chunk in _chunks([value.digest for value in wanted]):
        query = select(key, table.c.digest).where(among(conn, table.c.digest, chunk), *near)
        for number, digest in conn.execute(query):
            found.setdefault(bytes(digest), number)
    missing = [value for value in wanted if value.digest not in found]
    rows = [
        {**row, "digest": value.digest, "created_at": at}
        for value, row in zip(missing, new_rows(missing), strict=True)
    ]
    for chunk in _chunks(rows):
        stored = conn.execute(
            table.insert().returning(key, table.c.digest, sort_by_parameter_order=True), chunk
        )
        for number, digest in stored:
            found[bytes(digest)] = number
    return [found[value.digest] for value in values]


def shared_texts(conn: Connection, table: Table, keys: Iterable[int]) -> dict[int, bytes]:
    """The texts of ``table``'s values stored under ``keys``, by key: a body compressed
    against another ranking (dict_key) is read with that ranking's text."""
    key = value_key(table)
    against = table.c.get("dict_key")
    columns = (key, table.c.body) if against is None else (key, table.c.body, against)
    rows: dict[int, tuple[bytes, int | None]] = {}
    for chunk in _chunks(sorted(set(keys))):
        query = select(*columns).where(among(conn, key, chunk))
        for number, body, *dictionary in conn.execute(query):
            rows[number] = (bytes(body), dictionary[0] if dictionary else None)
    needed = {d for _body, d in rows.values() if d is not None and d not in rows}
    bases = shared_texts(conn, table, needed) if needed else {}
    texts = {n: decompressed(body) for n, (body, d) in rows.items() if d is None}
    bases.update(texts)
    for number, (body, d) in rows.items():
        if d is not None:
            texts[number] = decompressed(body, bases[d])
    return texts


def shared_values(conn: Connection, table: Table, keys: Iterable[int]) -> dict[int, Any]:
    """The values of ``table`` stored under ``keys``, decoded, by key."""
    return {number: json.loads(text) for number, text in shared_texts(conn, table, keys).items()}


def case_keys(conn: Connection, suite: str, case_ids: Sequence[str]) -> dict[str, int]:
    """The number of each of the suite's ``case_ids``, numbering those seen for the first time."""
    found = _case_keys(conn, suite, case_ids)
    new = [{"suite": suite, "case_id": c} for c in dict.fromkeys(case_ids) if c not in found]
    if new:
        insert = insert_for(conn)
        for chunk in _chunks(new):
            conn.execute(insert(cases).on_conflict_do_nothing(), chunk)
        found.update(_case_keys(conn, suite, [row["case_id"] for row in new]))
    return found


def _case_keys(conn: Connection, suite: str, case_ids: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in _chunks(list(dict.fromkeys(case_ids))):
        query = select(cases.c.case_id, cases.c.case_key).where(
            cases.c.suite == suite, among(conn, cases.c.case_id, chunk)
        )
        found.update({case_id: number for case_id, number in conn.execute(query)})
    return found


def next_run_key(conn: Connection) -> int:
    """The number of the run being stored, never given before: PostgreSQL's sequence; on
    SQLite the next key of run_numbers' AUTOINCREMENT (its row goes at once)."""
    if conn.dialect.name == "postgresql":
        return int(conn.execute(select(run_keys.next_value())).scalar_one())
    number = int(conn.execute(insert(run_numbers).returning(run_numbers.c.run_key)).scalar_one())
    conn.execute(delete(run_numbers).where(run_numbers.c.run_key == number))
    return number


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]
