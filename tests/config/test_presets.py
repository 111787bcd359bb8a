"""What the weaviate, vespa and rushdb presets need of a target: each mistake located, fixed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragcanary.config.target import TargetConfig
from ragcanary.errors import ConfigError, Problem
from ragcanary.suites.loaded import load_config

CONFIG = """\
embeddings:
  minilm: {{url: http://embedder:8080/v1/embeddings, model: all-MiniLM-L6-v2}}
targets:
  kb:
    url: http://db:8080
{target}
suites:
  core: {{cases: core.yaml, targets: [kb]}}
"""


def _problem(tmp_path: Path, target: str) -> Problem:
    (tmp_path / "core.yaml").write_text("cases:\n  - {id: a, query: q, relevant: [x]}\n")
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(target=target), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    [problem] = raised.value.problems
    return problem


@pytest.mark.parametrize(
    ("target", "path", "line", "message", "fix"),
    [
        pytest.param(
            "    preset: weaviate\n    collection: article\n    embedding: minilm",
            "targets.kb.collection",
            7,
            "'article' is not a Weaviate class name",
            "write collection: Article (Weaviate capitalises it)",
            id="weaviate-lowercase-class",
        ),
        pytest.param(
            "    preset: weaviate\n    collection: Article\n    search: bm25\n    score_order: asc",
            "targets.kb",
            4,
            "the weaviate preset's bm25 scores are similarities (score_order: desc), not 'asc'",
            "remove score_order: the preset sets it",
            id="weaviate-wrong-score-order",
        ),
        pytest.param(
            "    preset: vespa\n    embedding: minilm",
            "targets.kb",
            4,
            "a nearestNeighbor search needs vector_field (the tensor field of the schema)",
            "add vector_field: embedding, or remove embedding: for a text search",
            id="vespa-vector-field",
        ),
        pytest.param(
            "    preset: rushdb\n    collection: DOC_CHUNK",
            "targets.kb",
            4,
            "the rushdb preset needs text_field",
            "add text_field: text (the property with an embedding index)",
            id="rushdb-property",
        ),
        pytest.param(
            "    preset: qdrant\n    collection: docs\n    embedding: minilm\n"
            "    rank_profile: semantic",
            "targets.kb.rank_profile",
            9,
            "rank_profile is read by the vespa preset only",
            "remove rank_profile:",
            id="another-presets-field",
        ),
    ],
)
def test_a_preset_mistake_is_located_with_its_fix(
    tmp_path: Path, target: str, path: str, line: int, message: str, fix: str
) -> None:
    problem = _problem(tmp_path, target)
    assert (problem.path, problem.line, problem.message, problem.fix) == (path, line, message, fix)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        pytest.param({}, "needs embedding (a nearVector search) or search:", id="no-operator"),
        pytest.param({"collection": None}, "needs collection (the class)", id="no-class"),
        pytest.param({"collection": "Art-icle"}, "not a Weaviate class name", id="class-name"),
        pytest.param({"search": "nearVector"}, "no embedding makes one", id="near-vector"),
        pytest.param(
            {"search": "bm25", "embedding": "m"}, "its vector from embedding", id="bm25-vector"
        ),
        pytest.param(
            {"search": "nearText", "text_field": "body"}, "does not read it", id="near-text-field"
        ),
        pytest.param(
            {"search": "bm25", "id": "meta.ids[0]"}, "not a property of a Weaviate", id="id-path"
        ),
        pytest.param(
            {"embedding": "m", "score_order": "desc"}, "nearVector scores are distances", id="asc"
        ),
    ],
)
def test_a_weaviate_config_says_what_is_wrong(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        TargetConfig(
            **({"preset": "weaviate", "url": "http://w:8080", "collection": "Article"} | fields)
        )
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("search", "embedding", "order"),
    [
        ("nearVector", "m", "asc"),
        (None, "m", "asc"),
        ("nearText", None, "asc"),
        ("bm25", None, "desc"),
        ("hybrid", None, "desc"),
        ("hybrid", "m", "desc"),
    ],
)
def test_the_weaviate_operator_sets_the_score_order(
    search: str | None, embedding: str | None, order: str
) -> None:
    config = TargetConfig(
        preset="weaviate",
        url="http://w:8080",
        collection="Article",
        search=search,
        embedding=embedding,
    )
    assert config.score_order == order


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        pytest.param({"collection": "doc s"}, "'doc s' is not a Vespa name", id="sources"),
        pytest.param(
            {"embedding": "m", "vector_field": "emb)or(true"}, "not a Vespa name", id="field"
        ),
        pytest.param({"query_tensor": "q)"}, "not a Vespa name", id="tensor"),
        pytest.param(
            {"embedding": "m", "vector_field": "e", "text_field": "t"}, "both set", id="both"
        ),
        pytest.param({"score_order": "asc"}, "similarities", id="asc"),
    ],
)
def test_a_vespa_config_says_what_is_wrong(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        TargetConfig(**({"preset": "vespa", "url": "http://vespa:8080"} | fields))
    assert says in str(raised.value)


def test_a_rushdb_target_needs_no_embedding() -> None:
    config = TargetConfig(
        preset="rushdb", url="https://api.rushdb.com", collection="DOC_CHUNK", text_field="text"
    )
    assert (config.embedding, config.score_order) == (None, "desc")
    with pytest.raises(ValidationError, match="needs collection and text_field"):
        TargetConfig(preset="rushdb", url="https://api.rushdb.com")
