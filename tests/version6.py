"""Databases as ragcanary wrote them at schema version 6, for tests of the upgrade to 7.

Writes reports the way version 6's ``save_run`` did (``store.rows_v6``): the run-level report
in runs.report, every case entry in a results row, the history's values in a points row with
the case's verdict, the query vectors in their own table.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import Column, ForeignKey, MetaData, String, Table

from ragcanary.measure.case_verdict import RunFindings
from ragcanary.measure.report_json import marshal
from ragcanary.measure.run_report import RunReport
from ragcanary.store.engine import make_engine
from ragcanary.store.rows import VECTOR_KEY, run_row, vector_row
from ragcanary.store.rows_v6 import case_row, point_row
from ragcanary.store.schema import (
    UTCDateTime,
    candidates,
    claims,
    replicas,
    schema_version,
    vectors,
)
from ragcanary.store.schema_v6 import metadata_v6, points_v6, results_v6, runs_v6

# The baselines table before version 8 gave it a reason column.
baselines = Table(
    "baselines",
    MetaData(),
    Column("suite", String(200), primary_key=True),
    Column("target", String(200), primary_key=True),
    Column("run_id", String(200), ForeignKey(runs_v6.c.run_id), nullable=False),
    Column("set_at", UTCDateTime(), nullable=False),
)


def write_version6(
    url: str, reports: Iterable[RunReport], pinned: Iterable[tuple[str, str, str]] = ()
) -> None:
    """Create a version-6 database at ``url`` holding ``reports`` and the ``pinned``
    baselines (suite, target, run_id)."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            metadata_v6.create_all(conn)
            for table in (vectors, baselines, replicas, claims, candidates, schema_version):
                table.create(conn)
            at = datetime(2026, 1, 1, tzinfo=UTC)
            conn.execute(schema_version.insert().values(version=6, applied_at=at))
            for report in reports:
                data = marshal(report)
                run = run_row(report, data)
                cases = data["cases"]
                kept = [v for i, c in enumerate(cases) if (v := vector_row(report.run_id, i, c))]
                stored = {v["position"] for v in kept}
                findings = RunFindings.of_report(report)
                conn.execute(runs_v6.insert().values(run))
                if cases:
                    conn.execute(
                        results_v6.insert(),
                        [
                            case_row(
                                report.run_id,
                                i,
                                {k: v for k, v in c.items() if k != VECTOR_KEY}
                                if i in stored
                                else c,
                            )
                            for i, c in enumerate(cases)
                        ],
                    )
                    conn.execute(
                        points_v6.insert(),
                        [
                            point_row(run, i, c, findings.verdict(case.id, case.outcome))
                            for i, (case, c) in enumerate(zip(report.cases, cases, strict=True))
                        ],
                    )
                if kept:
                    conn.execute(vectors.insert(), kept)
            for suite, target, run_id in pinned:
                conn.execute(
                    baselines.insert().values(suite=suite, target=target, run_id=run_id, set_at=at)
                )
    finally:
        engine.dispose()
