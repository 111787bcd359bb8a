"""The hashes of a run's fingerprint: stable for a config, moved by a setting, never by a
secret, and the same whether or not the reader has the retrievers' secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragcanary.measure.fingerprint import config_changes
from ragcanary.serve.metrics.config_export import config_hash as exported_hash
from ragcanary.suites.fingerprint import (
    config_hash,
    embedding_model,
    fingerprint,
    suite_hash,
    target_hash,
)
from ragcanary.suites.loaded import LoadedConfig, load_config

CONFIG = """\
embeddings:
  minilm: {{url: "http://127.0.0.1:9/v1/embeddings", model: {model}}}
targets:
  search:
    url: http://127.0.0.1:9/search
    headers: {{Authorization: "Bearer ${{SEARCH_TOKEN}}"}}
    body: {{q: "{{query}}"}}
    embedding: minilm
    timeout: {timeout}
  other:
    url: http://127.0.0.1:9/other
    body: {{q: "{{query}}"}}
suites:
  core:
    cases: core.yaml
    targets: [search, other]
    k: {k}
"""


def load(
    directory: Path,
    *,
    token: str | None = "s3cret-token",
    model: str = "all-MiniLM-L6-v2",
    timeout: str = "5s",
    k: str = "[1, 5]",
    relevant: str = "doc-7",
) -> LoadedConfig:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "core.yaml").write_text(
        f"cases:\n  - {{id: c1, query: reset password, relevant: [{relevant}]}}\n",
        encoding="utf-8",
    )
    path = directory / "ragcanary.yaml"
    path.write_text(CONFIG.format(model=model, timeout=timeout, k=k), encoding="utf-8")
    environ = {} if token is None else {"SEARCH_TOKEN": token}
    return load_config(path, environ, query_targets=token is not None)


def hashes(loaded: LoadedConfig) -> tuple[str, str, str, str]:
    return (
        config_hash(loaded),
        suite_hash(loaded, "core"),
        target_hash(loaded, "search"),
        target_hash(loaded, "other"),
    )


def test_the_same_config_gives_the_same_short_hashes(tmp_path: Path) -> None:
    first, again = hashes(load(tmp_path / "a")), hashes(load(tmp_path / "b"))
    assert first == again
    assert all(len(h) == 12 and int(h, 16) >= 0 for h in first)


def test_the_config_hash_is_the_one_the_exporter_publishes(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert config_hash(loaded) == exported_hash(loaded)


def test_a_secret_never_moves_a_hash_nor_appears_in_the_fingerprint(tmp_path: Path) -> None:
    one, other = load(tmp_path / "a"), load(tmp_path / "b", token="another-secret")
    assert hashes(one) == hashes(other)
    assert "s3cret-token" not in repr(fingerprint(one, "core", "search"))


def test_a_reader_without_the_retrievers_secrets_computes_the_same_hashes(
    tmp_path: Path,
) -> None:
    """`baseline show` reads the config without them: it must not flag every baseline."""
    assert hashes(load(tmp_path / "a", token=None)) == hashes(load(tmp_path / "b"))


@pytest.mark.parametrize(
    ("changed", "moved"),
    [
        ({"timeout": "9s"}, {"config", "search"}),  # one target's setting
        ({"k": "[1, 10]"}, {"config", "suite"}),  # the suite's setting
        ({"relevant": "doc-8"}, {"config", "suite"}),  # a label
        ({"model": "bge-small"}, {"config"}),  # the embedding model has its own field
    ],
)
def test_a_setting_moves_the_hashes_of_what_holds_it(
    tmp_path: Path, changed: dict[str, str], moved: set[str]
) -> None:
    names = ("config", "suite", "search", "other")
    before = dict(zip(names, hashes(load(tmp_path / "a")), strict=True))
    after = dict(zip(names, hashes(load(tmp_path / "b", **changed)), strict=True))  # type: ignore[arg-type]
    assert {n for n in names if before[n] != after[n]} == moved


def test_the_embedding_model_is_the_target_s_endpoint_s(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert embedding_model(loaded, "search") == "all-MiniLM-L6-v2"
    assert embedding_model(loaded, "other") is None


def test_a_new_model_is_what_a_pinned_baseline_is_flagged_for(tmp_path: Path) -> None:
    pinned = fingerprint(load(tmp_path / "a"), "core", "search", 384)
    now = fingerprint(load(tmp_path / "b", model="bge-small"), "core", "search")
    assert [c.text for c in config_changes(pinned, now)] == [
        "embedding model all-MiniLM-L6-v2 → bge-small"
    ]  # the whole config's hash moved too: the diff of two runs says so, the flag does not
