"""Benchmark: one canary's 30-day history in SQLite and PostgreSQL stores filled like a daemon's.

The issue's scale is 1,000 canaries every 5 minutes for 30 days: 8,640 runs and 8.64M answers
rows. One canary's history has 8,640 points at any number of canaries; more canaries make the
tables around it bigger, which is what a history read must not feel. The store is filled with
bulk inserts (executemany on SQLite, COPY on PostgreSQL) of exactly the rows
``Store.save_run`` writes (``bulk``), run after run as a daemon would, then timed:

    .venv/bin/python bench/run.py history            # what docs/performance.md reports
    .venv/bin/python bench/history.py [--canaries 1000] [--backend sqlite]   # one-off scales
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bulk
import sqlalchemy
from render import section, table, verdict
from sqlalchemy.pool import NullPool

from ragcanary.measure.case_verdict import RunFindings
from ragcanary.measure.cases import Case
from ragcanary.measure.metrics import aggregate, case_metrics
from ragcanary.measure.report_json import marshal, marshal_case, unmarshal, unmarshal_case
from ragcanary.measure.run_report import RunReport
from ragcanary.reports.oncall import case_history
from ragcanary.store.engine import make_engine
from ragcanary.store.queries import history_query
from ragcanary.store.rows import run_row
from ragcanary.store.schema import rankings
from ragcanary.store.shared import BATCH
from ragcanary.store.storage import Store

TITLE = "Storage: one canary's history"
GOAL_MS = 50.0
DAYS = 30
EVERY_S = 300
KS = (1, 3, 5, 10)
DEPTH = 10
VARIANTS = 16  # different answers each canary gives, drawn at random run after run
POOL = 40  # candidate documents per canary, 3 of them relevant
# The previous release's get_report (schema 6, commit 19daaa0) on this machine, 2026-11-28.
PREVIOUS_GET_REPORT_MS = {"sqlite": 42.2, "postgresql": 55.7}
REPEAT = 7  # timed calls of each operation, after one untimed warm-up call
POSTGRES_URL = os.environ.get(
    "RAGCANARY_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
FULL_CANARIES = 1000
BACKENDS = ("sqlite", "postgresql")
QUICK_CANARIES = 50
CHECKED_STEP = 100  # the bulk run read back whole (and get_report is timed on)
NEW_IN_LAST = 10  # canaries whose ranking in the last run (through save_run) is new


@dataclass(frozen=True)
class Canary:
    """One canary of the filled suite: its judgements and the answers it may get."""

    case: Case
    entries: list[dict[str, Any]]  # VARIANTS case entries of a report, as marshal writes them
    # Each entry as the bulk fill stores it; the benchmark's runs judge nothing (no baseline),
    # so a canary's verdict is its outcome's.
    answers: list[bulk.Answer]


def canaries(count: int, seed: int = 0) -> list[Canary]:
    """``count`` labelled canaries, each with VARIANTS realistic answers (one times out)."""
    rng = random.Random(seed)
    made = []
    for c in range(count):
        docs = [f"doc-{c:04d}-{d:02d}" for d in range(POOL)]
        case = Case(
            f"canary-{c:04d}",
            f"how do I configure feature number {c} of the product?",
            {doc: rng.choice((1, 2)) for doc in rng.sample(docs, 3)},
        )
        # Each read and written back as a stored report's: exactly the JSON save_run writes.
        entries = [
            marshal_case(unmarshal_case(_entry(case, docs, rng, timeout=v == 0)))
            for v in range(VARIANTS)
        ]
        verdicts = RunFindings()
        answers = [bulk.answer(e, verdicts.verdict(case.id, e["outcome"])) for e in entries]
        made.append(Canary(case, entries, answers))
    return made


def _entry(case: Case, docs: list[str], rng: random.Random, timeout: bool) -> dict[str, Any]:
    assert case.relevant is not None
    ids = [] if timeout else rng.sample(docs, DEPTH)
    scores = sorted((rng.random() for _ in ids), reverse=True)
    metrics = case_metrics(ids, case.relevant, KS, DEPTH) if ids else {}
    left = rng.sample([d for d in docs if d not in ids], 2)
    return {
        "id": case.id,
        "query": case.query,
        "kind": case.kind,
        "outcome": "timeout" if timeout else "ok",
        "ids": ids,
        "scores": scores,
        "latency_s": round(rng.uniform(0.01, 0.2), 4),
        "error": "no answer within 5s" if timeout else None,
        "metrics": metrics,
        "vs_baseline": {
            "rbo": rng.random(),
            "jaccard": rng.random(),
            "entered": ids[-2:],
            "left": left,
            "top_score_delta": rng.uniform(-0.05, 0.05),
        },
    }


def report(run_id: str, started_at: datetime, suite: list[Canary], picks: list[int]) -> RunReport:
    """The report of one run in which canary i answered with its variant ``picks[i]``."""
    cases = [canary.entries[pick] for canary, pick in zip(suite, picks, strict=True)]
    return unmarshal(
        {
            "suite": "core",
            "target": "search",
            "run_id": run_id,
            "started_at": started_at.isoformat(),
            "duration_s": 3.2,
            "outcome": "ok",
            "coverage": sum(c["outcome"] == "ok" for c in cases) / len(cases),
            "metrics": aggregate([(c["metrics"], 1.0) for c in cases if c["metrics"]]),
            "cases": cases,
        }
    )


def run_head(
    template: RunReport, run_id: str, started_at: datetime, **fields: Any
) -> dict[str, Any]:
    """The runs row save_run writes for ``template`` as run ``run_id`` started at ``started_at``
    (and other ``fields`` changed), without its cases: their rows are inserted in bulk."""
    run = dataclasses.replace(template, run_id=run_id, started_at=started_at, cases=(), **fields)
    return run_row(run, marshal(run))


# Filling ---------------------------------------------------------------------------------------


def fill(url: str, suite: list[Canary], now: datetime, seed: int = 1) -> float:
    """Store 30 days of runs of ``suite``, one every EVERY_S up to ``now``; seconds it took.

    Runs go in in time order, many per transaction, through the driver's bulk paths, with
    the rows and numbers save_run would give them (``bulk``); only the run-level report
    repeats from run to run. The last run is saved through save_run itself, which must write
    exactly the rows the bulk fill would have; it and a bulk run are read back whole.
    """
    rng = random.Random(seed)
    steps = DAYS * 86_400 // EVERY_S
    template = report("template", now, suite, [rng.randrange(VARIANTS) for _ in suite])
    start = time.perf_counter()
    checked: RunReport | None = None
    with bulk.filling(url) as conn:
        numbers = bulk.numbering(conn, "core", [canary.case.id for canary in suite])
        batch: list[bulk.Numbered] = []
        for step in range(steps - 1):
            started_at = now - timedelta(seconds=EVERY_S * (steps - 1 - step))
            picks = [rng.randrange(VARIANTS) for _ in suite]
            run = run_head(template, f"run-{step:06d}", started_at)
            answered = [c.answers[pick] for c, pick in zip(suite, picks, strict=True)]
            batch.append(numbers.number(run, answered))
            if step == CHECKED_STEP:
                cases = [c.entries[pick] for c, pick in zip(suite, picks, strict=True)]
                checked = unmarshal({**run["report"], "cases": cases})
            if len(batch) * len(suite) >= 50_000 or step == steps - 2:
                bulk.write(conn, batch, numbers)
                batch = []
    before, picks = picks, [rng.randrange(VARIANTS) for _ in suite]
    # A few canaries' scores move in the last run, so save_run stores new rankings too and
    # the check covers the keys it gives them.
    data = marshal(report("run-last", now, suite, picks))
    for entry in data["cases"][:NEW_IN_LAST]:
        entry["scores"] = [score / 2 for score in entry["scores"]]
    last = unmarshal(data)
    with Store.from_url(url) as store:
        bulk.check_saved(store, numbers, last)
        for stored in (last, checked):
            if stored is not None and store.get_report(stored.run_id) != stored:
                raise RuntimeError(f"run {stored.run_id} does not read back as it was stored")
        since = now - timedelta(seconds=EVERY_S)
        for position in range(0, len(suite), max(1, len(suite) // 10)):
            canary = suite[position]
            got = store.case_history("core", canary.case.id, since=since)
            ids = [canary.entries[pick[position]]["ids"] for pick in (before, picks)]
            if [point["ids"] for point in got] != ids or set(got[0]) != set(got[1]):
                raise RuntimeError(f"case_history of {canary.case.id}: {got}")
    return time.perf_counter() - start


@contextlib.contextmanager
def database(backend: str) -> Iterator[str]:
    """The URL of an empty database on ``backend``, deleted afterwards.

    SQLite: a file in a temporary directory. PostgreSQL: a schema of its own in the local
    server's database (RAGCANARY_BENCH_POSTGRES), dropped with everything in it.
    """
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ragcanary-bench-") as directory:
            yield f"sqlite:///{Path(directory) / 'history.db'}"
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(POSTGRES_URL, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    url = sqlalchemy.make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={schema}"}
    )
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def database_bytes(url: str) -> int:
    """What the store takes on disk: the SQLite file and its WAL, or the schema's relations."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        if engine.dialect.name == "sqlite":
            path = Path(engine.url.database or "")
            return sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sqlalchemy.text(
                        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


# Timing ----------------------------------------------------------------------------------------


def timed(call: Callable[[], Any]) -> dict[str, Any]:
    """Median, fastest and slowest of REPEAT calls after one warm-up, and the rows returned."""
    result = call()
    times, cpu = [], []
    for _ in range(REPEAT):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    rows = len(result) if isinstance(result, list) else None
    return {
        "ms": statistics.median(times),
        "cpu_ms": statistics.median(cpu),  # this process only: not PostgreSQL's server
        "min_ms": min(times),
        "max_ms": max(times),
        "rows": rows,
    }


def bare_select(raw: Any, engine: sqlalchemy.Engine, query: sqlalchemy.Select[Any]) -> Callable:
    """The statements of a history on the driver connection ``raw``: ``query`` (the answers
    joined to their runs), then the bodies of the distinct rankings its rows name, as
    ``shared_values`` selects them. Rows as the driver gives them: no SQLAlchemy result
    processing, the bodies left compressed; what the database and driver alone cost.
    """
    compiled = query.compile(dialect=engine.dialect)
    params = {
        name: bulk.stamp(engine.dialect.name, value) if isinstance(value, datetime) else value
        for name, value in compiled.params.items()
    }
    args = tuple(params[n] for n in compiled.positiontup or ()) if compiled.positional else params
    ranking = [column.name for column in query.selected_columns].index("ranking_key")
    mark = "?" if engine.dialect.name == "sqlite" else "%s"
    key = rankings.c.ranking_key.name

    def select() -> list[Any]:
        cursor = raw.cursor()
        cursor.execute(str(compiled), args)
        rows: list[Any] = cursor.fetchall()
        keys = sorted({row[ranking] for row in rows})
        for start in range(0, len(keys), BATCH):  # the rankings, their bodies left compressed
            chunk = keys[start : start + BATCH]
            marks = ", ".join([mark] * len(chunk))
            body = f"SELECT {key}, body FROM {rankings.name} WHERE {key} IN ({marks})"
            cursor.execute(body, chunk)
            cursor.fetchall()
        cursor.close()
        raw.rollback()
        return rows

    return select


def measure(backend: str, count: int) -> dict[str, Any]:
    """Fill a store on ``backend`` with ``count`` canaries and time the reads around history."""
    suite = canaries(count)
    # The benchmark's own data is no daemon's: out of the collector's sight, the collections
    # that 8,640 rows trigger cost what they would in a daemon, not a scan of this data.
    gc.freeze()
    now = datetime.now(UTC).replace(microsecond=0)
    with database(backend) as url:
        with Store.from_url(url) as store:
            store.migrate()
        print(f"  {backend}: filling {count} canaries x {DAYS} days", flush=True)
        fill_s = fill(url, suite, now)
        size = database_bytes(url)
        runs_stored = DAYS * 86_400 // EVERY_S
        print(f"  {backend}: filled in {fill_s:.0f} s, {size / 1e6:,.0f} MB", flush=True)
        canary = suite[count // 2].case
        month, week, day = (now - timedelta(days=d) for d in (DAYS, 7, 1))
        # Pooled, as the daemon's store is: a connection (and SQLite's page cache in it) is
        # reused from call to call rather than opened for each.
        engine = make_engine(url)
        rng = random.Random(2)
        # The runs save_run is timed on, one per call (the warm-up's too), made beforehand:
        # a daemon hands save_run a report it has already built.
        fresh = iter(
            [
                report(
                    f"new-{i}",
                    now + timedelta(seconds=1),
                    suite,
                    [rng.randrange(VARIANTS) for _ in suite],
                )
                for i in range(REPEAT + 1)
            ]
        )
        raw = engine.raw_connection()
        with Store(engine) as store, contextlib.closing(raw):
            bare = bare_select(raw, engine, history_query("core", canary.id, None, month))
            ops = {
                "history": timed(lambda: store.case_history("core", canary.id, since=month)),
                "bare_sql": timed(bare),
                "history_week": timed(
                    lambda: store.case_history("core", canary.id, "search", since=week)
                ),
                "history_day": timed(lambda: store.case_history("core", canary.id, since=day)),
                "oncall": timed(
                    lambda: case_history(store, "core", canary, None, timedelta(days=DAYS), now)
                ),
                "save_run": timed(lambda: store.save_run(next(fresh))),
                # A store new to the run (one on the same engine: nothing remembered of its
                # rankings), then again on the store that has read it.
                "get_report_first": timed(
                    lambda: Store(engine).get_report(f"run-{CHECKED_STEP:06d}")
                ),
                "get_report": timed(lambda: store.get_report(f"run-{CHECKED_STEP:06d}")),
            }
    gc.unfreeze()
    for name, op in ops.items():
        print(f"  {backend}: {name:<14} {op['ms']:8.1f} ms  {op['rows'] or ''}", flush=True)
    return {
        "fill_s": fill_s,
        "bytes": size,
        "bytes_per_run": size / runs_stored,
        "bytes_per_canary_run": size / (runs_stored * count),
        "ops": ops,
    }


def postgres_unreachable() -> str | None:
    """Why the benchmark's PostgreSQL cannot be used, or None when it can."""
    engine = sqlalchemy.create_engine(
        POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3}
    )
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except sqlalchemy.exc.SQLAlchemyError as error:
        first = str(getattr(error, "orig", error)).strip().splitlines()[0]
        return f"PostgreSQL is not reachable at {POSTGRES_URL} ({first})"
    finally:
        engine.dispose()
    return None


def run(
    quick: bool, canaries_count: int | None = None, backends: tuple[str, ...] = BACKENDS
) -> dict[str, Any]:
    """Fill and time each backend at the full (or quick) scale; JSON-serialisable figures."""
    count = canaries_count or (QUICK_CANARIES if quick else FULL_CANARIES)
    measured: dict[str, Any] = {}
    for backend in backends:
        reason = postgres_unreachable() if backend == "postgresql" else None
        if reason and os.environ.get("RAGCANARY_REQUIRE_POSTGRES") == "1":
            raise RuntimeError(f"{reason} (RAGCANARY_REQUIRE_POSTGRES=1 forbids skipping)")
        measured[backend] = {"skipped": reason} if reason else measure(backend, count)
    steps = DAYS * 86_400 // EVERY_S
    return {
        "canaries": count,
        "runs": steps,
        "answers_rows": steps * count,
        "quick": quick,
        "goal_ms": GOAL_MS,
        "backends": measured,
    }


# Rendering -------------------------------------------------------------------------------------

_OPERATIONS = {
    "history": "`Store.case_history`, 30 days",
    "bare_sql": "its SQL alone on the driver (reference)",
    "history_week": "`Store.case_history`, one target, 7 days",
    "history_day": "`Store.case_history`, 1 day",
    "oncall": "`ragcanary history` rows (`oncall.case_history`), 30 days",
    "save_run": "`Store.save_run`, one run",
    "get_report_first": "`Store.get_report`, one run, first read (nothing remembered)",
    "get_report": "`Store.get_report`, one run, read again",
}
_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def render(result: dict[str, Any]) -> str:
    """The section body: what was measured, the one command, the figures, what they mean."""
    count, steps = result["canaries"], result["runs"]
    measured = {b: m for b, m in result["backends"].items() if "skipped" not in m}
    stores = list(measured.values())
    rows = []
    for op, label in _OPERATIONS.items():
        found = [m["ops"][op] for m in stores if op in m["ops"]]
        if len(found) < len(stores):  # results stored before the operation was timed
            continue
        cells = [f"{f['ms']:,.1f} ({f['min_ms']:,.1f} to {f['max_ms']:,.1f})" for f in found]
        returned = found[0]["rows"] if found else None
        rows.append([label, *cells, "" if returned is None else f"{returned:,}"])
    history = [m["ops"]["history"]["ms"] for m in stores]
    ratios = [h / m["ops"]["bare_sql"]["ms"] for h, m in zip(history, stores, strict=True)]
    rows += [
        ["history / its SQL alone", *(f"{r:.2f}" for r in ratios), ""],
        [f"history, goal ≤ {GOAL_MS:g} ms", *(verdict(h, GOAL_MS) for h in history), ""],
        ["filled in", *(f"{m['fill_s']:,.0f} s" for m in stores), ""],
        [
            "database size (per run; per canary-run)",
            *(
                f"{m['bytes'] / 1e9:,.2f} GB ({m['bytes_per_run'] / 1e3:,.0f} kB; "
                f"{m['bytes_per_canary_run']:,.0f} B)"
                for m in stores
            ),
            "",
        ],
    ]
    figures = table(
        ["operation"] + [f"{_NAMES[b]} ms: median (range)" for b in measured] + ["rows"], rows
    )
    what = (
        f"One canary's history over {DAYS} days in a store that {count:,} canaries filled every "
        f"{EVERY_S // 60} minutes: {steps:,} runs, {result['answers_rows']:,} answers rows, each "
        f"run's report shaped like `to_report`'s (depth {DEPTH}, {len(KS) * 5 + 1} metrics per "
        "case, a baseline comparison; every canary answers with one of "
        f"{VARIANTS} rankings at random, so each of them is stored once a day, as `save_run` "
        "reuses a ranking stored within a day). The store is filled in bulk (executemany on "
        "SQLite, COPY on PostgreSQL, which then runs ANALYZE as autovacuum would) with the rows "
        "and numbers `save_run` writes (schema version 7), in time order; the last run goes "
        "through `save_run` itself, which must write exactly the rows the bulk fill would, and "
        f"it and a bulk run are read back whole. Each operation is timed {REPEAT} times after "
        "a warm-up call. The reference is the history's two statements on the driver's own "
        "cursor: the answers joined to their runs, then the bodies of the rankings they name, "
        "rows as the driver returns them (bodies left compressed)."
    )
    return section(what, "history", figures, _meaning(result, measured))


def _meaning(result: dict[str, Any], measured: dict[str, Any]) -> str:
    said = []
    for backend, m in measured.items():
        history, bare = m["ops"]["history"], m["ops"]["bare_sql"]
        said.append(
            f"On {_NAMES[backend]} one canary's {result['runs']:,}-point history takes "
            f"{history['ms']:,.1f} ms ({verdict(history['ms'], GOAL_MS)} the goal of "
            f"{GOAL_MS:g} ms; {history['cpu_ms']:,.1f} ms of it CPU time in this process), "
            f"{history['ms'] / bare['ms']:.1f} times its bare SQL, which takes "
            f"{bare['ms']:,.1f} ms ({bare['cpu_ms']:,.1f} ms of CPU here, the driver making "
            "Python values of the rows)."
        )
    for backend, m in result["backends"].items():
        if "skipped" in m:
            said.append(f"{_NAMES[backend]} was not measured: {m['skipped']}.")
    said.append(
        "A history reads one range of the answers table's key (schema version 7): per "
        "canary-run a few numbers (its run's number, the latency, the number of the ranking "
        "it answered, the verdict), keyed by case then run, so one canary's answers are one "
        "range however many canaries share the store (SQLite keeps the table in key order, "
        "WITHOUT ROWID; PostgreSQL finds them through its primary-key index). Each is joined "
        "to its runs row by number, and each distinct ranking it names (here about "
        f"{VARIANTS * DAYS:,} in {DAYS} days) is read and decoded once. What the history "
        "adds to the bare SQL is SQLAlchemy, decompressing and decoding the rankings it has "
        "not read before (what a history shows of each is remembered: a ranking never "
        "changes and its number is never given again; the first reading of a month decodes "
        "them all), and making 8,640 dicts with aware datetimes and id lists. A history since "
        "a time reads only the stretch of the case's answers of the runs since. Schema "
        "version 6 kept the shown values of every canary-run in a points table of their own; "
        "the previous release (schema 6, commit 19daaa0), measured with its own version of "
        "this benchmark on the same machine on 2026-11-28: a history in 35.8 ms on SQLite "
        "and 59.3 ms on PostgreSQL (tests were running beside it), `get_report` in "
        f"{PREVIOUS_GET_REPORT_MS['sqlite']} and {PREVIOUS_GET_REPORT_MS['postgresql']} ms, "
        "`save_run` in 142.6 and 183.5 ms, in a store of 12.8 and 13.6 GB. Its case entries "
        "held 21 metrics each; they now hold 26 (bpref and judged@k joined them), a quarter "
        "more to decode."
    )
    full_scale = {} if result["quick"] else measured  # the previous release's: full scale
    for backend, m in full_scale.items():
        if "get_report_first" not in m["ops"]:
            continue
        first, again = m["ops"]["get_report_first"]["ms"], m["ops"]["get_report"]["ms"]
        before = PREVIOUS_GET_REPORT_MS[backend]
        said.append(
            f"On {_NAMES[backend]} `get_report` reads a run it has not read before in "
            f"{first:,.1f} ms ({'faster than' if first <= before else '**slower** than'} the "
            f"previous release's {before} ms) and again in {again:,.1f} ms."
        )
    said.append(
        "A first read decompresses each ranking (with the one it was compressed against) and "
        "decodes it; a store then remembers the case entry it made of each ranking "
        "(`store.remembered`, up to 2,500: a run and its baseline of this suite), which the "
        "runs of a pair mostly repeat and which every page comparing a run with its pinned "
        "baseline reads again; a ranking never changes and its number is never given again, "
        "so nothing remembered can be stale, and each run still gets its own latencies. "
        "A `save_run` still touches one place per canary of a table keyed by case (answers), "
        "and looks up the rankings it may reuse by digest."
    )
    if result["quick"]:
        said.append(
            f"Quick scale: {result['canaries']} canaries instead of {FULL_CANARIES:,}; the "
            "history has as many points, only the tables around it are smaller."
        )
    return " ".join(said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CANARIES} canaries")
    parser.add_argument("--canaries", type=int, help=f"default {FULL_CANARIES:,}")
    parser.add_argument("--backend", choices=BACKENDS, action="append", help="default: both")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    result = run(args.quick, args.canaries, tuple(args.backend or BACKENDS))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(render(result))


if __name__ == "__main__":
    main()
