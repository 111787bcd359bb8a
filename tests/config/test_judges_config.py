"""`judges:`, a suite's `judge:` and a generic target's `fetch:`: defaults, secrets and each
mistake located with its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcanary.errors import ConfigError
from ragcanary.suites.loaded import load_config

CONFIG = """\
judges:
  reranker:
    kind: rerank
    url: http://127.0.0.1:8080/rerank
    model: minilm
    headers: {{Authorization: "Bearer ${{JUDGE_TOKEN}}"}}
{judge_extra}
targets:
  kb:
    url: http://127.0.0.1:8088/search
    body: {{q: "{{query}}"}}
{target_extra}
suites:
  core:
    cases: core.yaml
    targets: [kb]
    judge: {judge}
"""
SUITE = "cases:\n  - {id: a, query: alpha, relevant: [d1]}\n"


def write(
    tmp_path: Path, judge: str = "reranker", judge_extra: str = "", target_extra: str = ""
) -> Path:
    (tmp_path / "core.yaml").write_text(SUITE)
    path = tmp_path / "ragcanary.yaml"
    path.write_text(CONFIG.format(judge=judge, judge_extra=judge_extra, target_extra=target_extra))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, {"JUDGE_TOKEN": "s3cret-judge"})
    return [str(p) for p in caught.value.problems]


def test_a_judge_has_the_contract_s_defaults_and_its_header_is_a_secret(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path), {"JUDGE_TOKEN": "s3cret-judge"})
    judge = loaded.config.judges["reranker"]
    assert (judge.kind, judge.max_per_run, judge.max_per_day, judge.min_grade_score) == (
        "rerank",
        50,
        None,
        0.5,
    )
    assert loaded.config.suites["core"].judge == "reranker"
    assert "Bearer s3cret-judge" in loaded.secrets


def test_commands_reading_stored_runs_need_no_judge_key(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path), {}, query_targets=False)
    assert loaded.config.judges["reranker"].model == "minilm"


def test_an_unknown_judge_is_located_with_a_suggestion(tmp_path: Path) -> None:
    (found,) = problems(write(tmp_path, judge="rerankr"))
    assert "suites.core.judge" in found
    assert "line 17" in found
    assert "unknown judge 'rerankr'" in found
    assert "did you mean 'reranker'?" in found


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ("    kind: llm", "judges.reranker.kind", "kind"),
        ("    max_per_run: 0", "judges.reranker.max_per_run", "1 or more"),
        ("    min_grade_score: 1.5", "judges.reranker.min_grade_score", "below 1"),
        ("    url: ftp://x/rerank", "judges.reranker.url", "not an http(s) URL"),
    ],
)
def test_a_bad_judge_field_is_located(tmp_path: Path, extra: str, where: str, message: str) -> None:
    text = write(tmp_path).read_text()
    key = extra.split(":")[0].strip()
    lines = [line for line in text.splitlines() if not line.startswith(f"    {key}:")]
    at = lines.index("    model: minilm")
    lines.insert(at + 1, extra)
    (tmp_path / "ragcanary.yaml").write_text("\n".join(lines) + "\n")
    found = problems(tmp_path / "ragcanary.yaml")
    assert any(where in p and message in p for p in found), found
    assert not any("s3cret-judge" in p for p in found)


def test_a_generic_target_declares_fetch(tmp_path: Path) -> None:
    extra = '    fetch: {url: "http://127.0.0.1:8088/docs/{id}", text: doc.body}'
    loaded = load_config(write(tmp_path, target_extra=extra), {"JUDGE_TOKEN": "x"})
    fetch = loaded.config.targets["kb"].fetch
    assert fetch is not None
    assert (fetch.url, fetch.text) == (
        "http://127.0.0.1:8088/docs/{id}",
        "doc.body",
    )


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ('    fetch: {url: "http://h/docs/"}', "targets.kb.fetch.url", "has no {id}"),
        ('    fetch: {url: "http://h/{id}/{kind}"}', "targets.kb.fetch.url", "{kind}"),
        ('    fetch: {url: "http://{id}/x"}', "targets.kb.fetch.url", "path or query"),
        ('    fetch: {url: "http://h/{id}", text: "a[?"}', "targets.kb.fetch.text", "JMESPath"),
    ],
)
def test_a_bad_fetch_is_located(tmp_path: Path, extra: str, where: str, message: str) -> None:
    found = problems(write(tmp_path, target_extra=extra))
    assert any(where in p and message in p for p in found), found


def test_chroma_which_fetches_texts_itself_refuses_fetch(tmp_path: Path) -> None:
    path = write(tmp_path)
    text = path.read_text().replace(
        '    url: http://127.0.0.1:8088/search\n    body: {q: "{query}"}\n',
        "    preset: chroma\n    url: http://127.0.0.1:8000\n    collection: docs\n"
        '    embedding: m\n    fetch: {url: "http://h/{id}"}\n',
    )
    text = "embeddings:\n  m: {url: http://127.0.0.1:1/v1/embeddings, model: m}\n" + text
    path.write_text(text)
    found = problems(path)
    assert any("targets.kb.fetch" in p and "remove fetch:" in p for p in found), found


def test_a_preset_that_cannot_fetch_texts_itself_takes_fetch(tmp_path: Path) -> None:
    """Qdrant (and every HTTP preset but Chroma) has no way of its own to a document's text:
    a docs service's URL is how a judge reads it."""
    path = write(tmp_path)
    text = path.read_text().replace(
        '    url: http://127.0.0.1:8088/search\n    body: {q: "{query}"}\n',
        "    preset: qdrant\n    url: http://127.0.0.1:6333\n    collection: docs\n"
        '    embedding: m\n    fetch: {url: "http://h/docs/{id}", text: body}\n',
    )
    text = "embeddings:\n  m: {url: http://127.0.0.1:1/v1/embeddings, model: m}\n" + text
    path.write_text(text)
    fetch = load_config(path, {"JUDGE_TOKEN": "t"}).config.targets["kb"].fetch
    assert fetch is not None
    assert (fetch.url, fetch.text) == ("http://h/docs/{id}", "body")
