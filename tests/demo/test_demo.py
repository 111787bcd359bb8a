"""Tests of the bundled demo: corpus, BM25 retriever, incident modes, HTTP API and suite file."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ragcanary.demo.__main__ import main as demo_main
from ragcanary.demo.corpus import Doc, load_corpus, suite_path
from ragcanary.demo.retriever import (
    MODES,
    BackgroundServer,
    Hit,
    Index,
    Mode,
    ModeSettings,
    answer,
    build_index,
    create_app,
    is_dropped,
    rewrite_query,
    shift_scores,
    shuffle_top,
    stem,
    tokenize,
    truncated,
)
from ragcanary.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CaseDict = dict[str, Any]  # one case of suite.yaml as parsed by yaml.safe_load
JSON_QUERY = "serialize a dict to a JSON formatted string"
QUERIES = [
    JSON_QUERY,
    "run a shell command and capture its output",
    "join path components together",
    "greatest common divisor of integers",
    "parse a URL into scheme, host, path and query",
]


@pytest.fixture(scope="module")
def corpus() -> list[Doc]:
    return load_corpus()


@pytest.fixture(scope="module")
def index(corpus: list[Doc]) -> Index:
    return build_index(corpus)


def _client(index: Index, mode: Mode = "normal") -> httpx.AsyncClient:
    """An HTTP client talking to a fresh app in-process, through httpx's ASGI transport."""
    transport = httpx.ASGITransport(app=create_app(mode, index=index))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


@pytest.fixture(scope="module")
def cases() -> list[CaseDict]:
    loaded: list[CaseDict] = yaml.safe_load(suite_path().read_text(encoding="utf-8"))["cases"]
    return loaded


def _grades(case: CaseDict) -> dict[str, int]:
    """The case's labels as id -> grade ({} for negative and label-free cases)."""
    relevant = case.get("relevant") or {}
    if isinstance(relevant, list):
        return dict.fromkeys(relevant, 1)
    return dict(relevant)


def _hit_rate(index: Index, cases: list[CaseDict], mode: ModeSettings, k: int = 5) -> float:
    labelled = [c for c in cases if _grades(c)]
    hits = 0
    for case in labelled:
        ids = [h.id for h in answer(index, mode, case["query"], k)]
        hits += any(_grades(case).get(i, 0) > 0 for i in ids)
    return hits / len(labelled)


# --- corpus ------------------------------------------------------------------------------


def test_corpus_has_over_a_thousand_docs_with_unique_dotted_ids(corpus: list[Doc]) -> None:
    """The packaged corpus loads, is large enough to be a real retrieval problem, ids unique."""
    ids = [d.id for d in corpus]
    assert len(corpus) > 1000
    assert len(set(ids)) == len(ids)
    assert {"json.dumps", "subprocess.run", "os.path.join"} <= set(ids)
    assert all(d.title == d.id and d.text for d in corpus)


def test_build_script_is_deterministic(tmp_path: Path) -> None:
    """Building the corpus twice gives byte-identical files (sorted, gzip mtime 0)."""
    spec = importlib.util.spec_from_file_location(
        "build_demo_corpus", ROOT / "scripts" / "build_demo_corpus.py"
    )
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    count = script.build(first)
    script.build(second)
    assert count > 1000
    assert first.read_bytes() == second.read_bytes()


# --- tokenizing and ranking --------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "stemmed"),
    [
        (["parse", "parsed", "parses", "parsing"], {"pars"}),
        (["file", "files"], {"fil"}),
        (["class", "classes"], {"class"}),
        (["process", "processes"], {"process"}),
        (["sort", "sorted", "sorting"], {"sort"}),
    ],
)
def test_stem_brings_inflections_together(words: list[str], stemmed: set[str]) -> None:
    """Inflected forms of a word stem to one token so questions meet docstrings."""
    assert {stem(w) for w in words} == stemmed


def test_tokenize_splits_identifiers_and_drops_stopwords() -> None:
    """Dotted and snake_case names become words; stopwords and single letters go."""
    assert tokenize("Use os.path.join_all on a file") == ["use", "os", "path", "join", "all", "fil"]


@pytest.mark.anyio
async def test_known_query_ranks_labelled_doc_in_top5_over_the_api(index: Index) -> None:
    """The JSON canary finds json.dumps in the top 5 through POST /search."""
    async with _client(index) as client:
        response = await client.post("/search", json={"q": JSON_QUERY, "limit": 5})
    assert response.status_code == 200
    body = response.json()
    assert body["mode"] == "normal"
    assert "json.dumps" in [h["id"] for h in body["hits"]]
    assert set(body["hits"][0]) == {"id", "score", "title"}


@pytest.mark.parametrize("query", QUERIES)
def test_scores_lie_in_unit_interval_ordered_desc_then_by_id(index: Index, query: str) -> None:
    """Normalised scores are in (0, 1), descending, with ties broken by id."""
    hits = index.search(query, 50)
    assert len(hits) == 50
    assert all(0 < h.score < 1 for h in hits)
    assert [(-h.score, h.id) for h in hits] == sorted((-h.score, h.id) for h in hits)


@settings(max_examples=40, deadline=None)
@given(
    words=st.lists(st.sampled_from([*tokenize(" ".join(QUERIES)), "zzqx"]), max_size=6),
    limit=st.integers(1, 20),
)
def test_search_returns_at_most_limit_sorted_hits(
    index: Index, words: list[str], limit: int
) -> None:
    """Any query gives at most ``limit`` distinct hits, sorted by score then id."""
    hits = index.search(" ".join(words), limit)
    assert len(hits) <= limit
    assert len({h.id for h in hits}) == len(hits)
    assert [(-h.score, h.id) for h in hits] == sorted((-h.score, h.id) for h in hits)


def test_query_without_known_words_finds_nothing(index: Index) -> None:
    """An empty or out-of-vocabulary query answers with no hits rather than arbitrary ones."""
    assert index.search("", 10) == []
    assert index.search("zzqx qqzv", 10) == []


# --- incident modes ----------------------------------------------------------------------


def test_drop_docs_removes_the_dropped_shard_from_results(index: Index) -> None:
    """drop-docs never returns a dropped document, and the JSON canary loses its answers."""
    normal = index.search(JSON_QUERY, 10)
    dropped = index.search(JSON_QUERY, 10, drop_fraction=0.4)
    assert any(is_dropped(h.id, 0.4) for h in normal)
    assert dropped
    assert not any(is_dropped(h.id, 0.4) for h in dropped)
    assert "json.dumps" not in {h.id for h in dropped}


@pytest.mark.parametrize(("fraction", "share"), [(0.0, 0.0), (1.0, 1.0)])
def test_drop_fraction_bounds(corpus: list[Doc], fraction: float, share: float) -> None:
    """Fraction 0 loses nothing and fraction 1 loses everything."""
    assert sum(is_dropped(d.id, fraction) for d in corpus) / len(corpus) == share


def test_shift_scores_lowers_every_score_by_the_shift(index: Index) -> None:
    """shift-scores keeps the ranking and lowers each score by 0.15."""
    normal = answer(index, ModeSettings(), JSON_QUERY, 10)
    shifted = answer(index, ModeSettings(mode="shift-scores"), JSON_QUERY, 10)
    assert [h.id for h in shifted] == [h.id for h in normal]
    for before, after in zip(normal, shifted, strict=True):
        assert after.score == pytest.approx(before.score - 0.15, abs=1e-6)


@pytest.mark.parametrize(("score", "shifted"), [(0.9, 0.75), (0.15, 0.0), (0.1, 0.0)])
def test_shift_scores_floors_at_zero(score: float, shifted: float) -> None:
    """A score below the shift ends at 0, never negative."""
    [hit] = shift_scores([Hit(id="a", score=score, title="a")], 0.15)
    assert hit.score == pytest.approx(shifted)


def test_shuffle_keeps_the_top5_set_but_changes_order(index: Index) -> None:
    """shuffle reorders the top 5 (same ids), leaves the rest, and is deterministic."""
    mode = ModeSettings(mode="shuffle")
    changed = 0
    for query in QUERIES:
        normal = index.search(query, 10)
        shuffled = answer(index, mode, query, 10)
        assert {h.id for h in shuffled[:5]} == {h.id for h in normal[:5]}
        assert shuffled[5:] == normal[5:]
        assert answer(index, mode, query, 10) == shuffled
        changed += [h.id for h in shuffled] != [h.id for h in normal]
    assert changed == len(QUERIES)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 12), depth=st.integers(2, 8), query=st.text(max_size=20))
def test_shuffle_top_is_a_visible_permutation_of_the_top(n: int, depth: int, query: str) -> None:
    """The top ``depth`` hits are permuted (never left as they were); the tail stays put."""
    hits = [Hit(id=f"d{i:02}", score=1 - i / 100, title="") for i in range(n)]
    shuffled = shuffle_top(hits, query, seed=0, depth=depth)
    assert sorted(shuffled[:depth], key=lambda h: h.id) == hits[:depth]
    assert shuffled[depth:] == hits[depth:]
    assert (shuffled != hits) == (min(n, depth) >= 2)


@pytest.mark.anyio
async def test_down_answers_503(index: Index) -> None:
    """In mode down every search fails with 503 while /healthz stays up."""
    async with _client(index, "down") as client:
        assert (await client.post("/search", json={"q": JSON_QUERY})).status_code == 503
        health = await client.get("/healthz")
    assert health.json() == {"status": "ok", "mode": "down"}


@pytest.mark.anyio
async def test_mode_can_be_switched_while_running(index: Index) -> None:
    """POST /mode changes what /search does; GET /mode reports it; bad modes are refused."""
    async with _client(index) as client:
        assert (await client.get("/mode")).json()["mode"] == "normal"
        before = (await client.post("/search", json={"q": JSON_QUERY, "limit": 3})).json()
        switched = await client.post("/mode", json={"mode": "shift-scores", "shift": 0.2})
        assert switched.status_code == 200
        assert (await client.get("/mode")).json() == switched.json()
        after = (await client.post("/search", json={"q": JSON_QUERY, "limit": 3})).json()
        assert after["mode"] == "shift-scores"
        assert after["hits"][0]["score"] == pytest.approx(before["hits"][0]["score"] - 0.2)
        await client.post("/mode", json={"mode": "down"})
        assert (await client.post("/search", json={"q": JSON_QUERY})).status_code == 503
        assert (await client.post("/mode", json={"mode": "on-fire"})).status_code == 422
        await client.post("/mode", json={"mode": "normal"})
        assert (await client.post("/search", json={"q": JSON_QUERY})).status_code == 200


# --- the lookup endpoint ------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_doc_answers_200_with_a_held_document_and_404_otherwise(
    index: Index, corpus: list[Doc]
) -> None:
    """GET /docs/{id}: the document for an id the index holds, 404 for one it never held."""
    held = next(d for d in corpus if d.id == "json.dumps")
    async with _client(index) as client:
        found = await client.get("/docs/json.dumps")
        unknown = await client.get("/docs/json.no_such_function")
        slashed = await client.get("/docs/json%2Fdumps")
    assert found.status_code == 200
    assert found.json() == {"id": held.id, "title": held.title, "text": held.text}
    assert unknown.status_code == 404
    assert "json.no_such_function" in unknown.json()["detail"]
    assert slashed.status_code == 404


@pytest.mark.anyio
async def test_get_doc_follows_drop_docs_as_search_does(index: Index, corpus: list[Doc]) -> None:
    """In drop-docs a dropped document is 404 and a kept one 200, exactly the ones search
    no longer and still returns; back in normal mode every document is held again."""
    dropped = next(d.id for d in corpus if is_dropped(d.id, 0.4))
    kept = next(d.id for d in corpus if not is_dropped(d.id, 0.4))
    async with _client(index) as client:
        assert (await client.get(f"/docs/{dropped}")).status_code == 200
        await client.post("/mode", json={"mode": "drop-docs", "fraction": 0.4})
        assert (await client.get(f"/docs/{dropped}")).status_code == 404
        assert (await client.get(f"/docs/{kept}")).status_code == 200
        await client.post("/mode", json={"mode": "shift-scores"})
        assert (await client.get(f"/docs/{dropped}")).status_code == 200
    assert index.get(dropped, drop_fraction=0.4) is None
    assert index.get(kept, drop_fraction=0.4) is not None


@pytest.mark.anyio
async def test_get_doc_is_down_with_the_searches(index: Index) -> None:
    """In mode down the lookup fails like the searches: 503, so nothing is said gone."""
    async with _client(index, "down") as client:
        assert (await client.get("/docs/json.dumps")).status_code == 503


# --- background server -------------------------------------------------------------------


def test_background_server_serves_real_http_and_stops(index: Index) -> None:
    """BackgroundServer accepts connections on entry and releases the port on exit."""
    with BackgroundServer(port=0, index=index) as server:
        response = httpx.post(server.search_url, json={"q": JSON_QUERY, "limit": 5}, timeout=5)
        assert response.status_code == 200
        assert "json.dumps" in [h["id"] for h in response.json()["hits"]]
        port = server.port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_background_server_reports_a_busy_port(index: Index) -> None:
    """A port already in use becomes a UsageError that names the address."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UsageError, match=f"127.0.0.1:{port}"):
            BackgroundServer(port=port, index=index).start()


def test_module_entry_point_rejects_unknown_modes() -> None:
    """``python -m ragcanary.demo --mode`` only accepts the known incident modes."""
    assert MODES == ("normal", "drop-docs", "shift-scores", "shuffle", "down")
    with pytest.raises(SystemExit) as exited:
        demo_main(["--mode", "on-fire"])
    assert exited.value.code == 2


# --- the demo suite ----------------------------------------------------------------------


def test_suite_has_enough_cases_of_each_kind(cases: list[CaseDict]) -> None:
    """At least 60 cases with unique ids, 6 negative canaries and 5 label-free cases."""
    ids = [c["id"] for c in cases]
    assert len(cases) >= 60
    assert len(set(ids)) == len(ids)
    negatives = [c for c in cases if c.get("relevant") == []]
    assert len(negatives) >= 6
    assert all(c.get("max_score") is not None for c in negatives)
    assert sum("relevant" not in c for c in cases) >= 5


def test_every_labelled_id_exists_in_the_corpus(cases: list[CaseDict], corpus: list[Doc]) -> None:
    """Labels point at real documents with grades 1 to 3."""
    known = {d.id for d in corpus}
    labels = [(c["id"], doc, g) for c in cases for doc, g in _grades(c).items()]
    assert labels
    assert [(case, doc) for case, doc, _ in labels if doc not in known] == []
    assert {g for _, _, g in labels} <= {1, 2, 3}


def test_suite_passes_in_normal_mode(index: Index, cases: list[CaseDict]) -> None:
    """Normal mode: Hit@5 is high but not perfect, no negative leaks, every min_score met."""
    normal = ModeSettings()
    assert 0.7 <= _hit_rate(index, cases, normal) < 1.0
    for case in cases:
        hits = answer(index, normal, case["query"], 10)
        top = hits[0].score if hits else 0.0
        if case.get("max_score") is not None:
            assert top < case["max_score"], case["id"]
        if case.get("min_score") is not None:
            assert top >= case["min_score"], case["id"]


def test_drop_docs_visibly_lowers_the_suites_hit_rate(index: Index, cases: list[CaseDict]) -> None:
    """drop-docs costs the demo suite at least 0.2 of Hit@5."""
    normal = _hit_rate(index, cases, ModeSettings())
    dropped = _hit_rate(index, cases, ModeSettings(mode="drop-docs"))
    assert normal - dropped >= 0.2


@pytest.mark.anyio
async def test_variants_are_other_strategies_over_the_same_corpus(index: Index) -> None:
    """?variant=rewrite searches the query with its first hit's title appended; ?variant=
    truncated searches an index of each document's title and the start of its text."""
    body = {"q": JSON_QUERY, "limit": 10}
    async with _client(index) as client:
        plain = (await client.post("/search", json=body)).json()["hits"]
        rewritten = (await client.post("/search?variant=rewrite", json=body)).json()["hits"]
        cut = (await client.post("/search?variant=truncated", json=body)).json()["hits"]
        refused = await client.post("/search?variant=dense", json=body)
    assert [h["id"] for h in plain] == [h.id for h in index.search(JSON_QUERY, 10)]
    expanded = rewrite_query(index, JSON_QUERY)
    assert expanded == f"{JSON_QUERY} {plain[0]['title']}"
    assert [h["id"] for h in rewritten] == [h.id for h in index.search(expanded, 10)]
    short = Index(truncated(index.docs, 80))
    assert [h["id"] for h in cut] == [h.id for h in short.search(JSON_QUERY, 10)]
    assert all(len(d.text) <= 80 for d in short.docs)
    assert refused.status_code == 422
