"""A real Chroma server for tests (`chroma run`), and collections of toy vectors in it.

The server comes from its own virtualenv (`make test` builds `.venv-chroma`; RAGCANARY_CHROMA
names another binary). A collection holds, per query, its relevant chunk (the query's own toy
vector, so it is always the nearest) and three others, each chunk carrying the application's
document id in its metadata: ``doc-I`` for query I's relevant chunk ``chunk-I-0``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from retrievers import toy_vector
from server_process import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ENV = "RAGCANARY_REQUIRE_CHROMA"
API = "/api/v2/tenants/default_tenant/databases/default_database/collections"
START_TIMEOUT_S = 60.0
CHUNKS_PER_QUERY = 4


def chroma_binary() -> str:
    """The `chroma` executable; skips the test without one (fails it in CI, see REQUIRE_ENV)."""
    found = os.environ.get("RAGCANARY_CHROMA") or str(ROOT / ".venv-chroma" / "bin" / "chroma")
    if Path(found).is_file():
        return found
    reason = f"no Chroma server at {found}; `make test` installs one in .venv-chroma"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 forbids skipping)")
    pytest.skip(reason)


@contextlib.contextmanager
def chroma_server(directory: Path) -> Iterator[str]:
    """`chroma run` on 127.0.0.1 with its data and log in ``directory``; its base URL.

    Stopped on the way out; a server that exits or never answers its heartbeat fails the
    test with the tail of its log.
    """
    binary = chroma_binary()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [binary, "run", "--path", str(directory / "db"), "--host", "127.0.0.1"]
    process = ServerProcess(
        [*serve, "--port", str(port)],
        f"{url}/api/v2/heartbeat",
        directory / "server.log",
        env={"ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        process.wait_ready(within_s=START_TIMEOUT_S)
        yield url
    finally:
        process.stop()


def create_collection(url: str, name: str, queries: Sequence[str], dimensions: int) -> str:
    """A new cosine collection: per query its relevant chunk and three others; its id."""
    created = httpx.post(f"{url}{API}", json={"name": name, "metadata": {"hnsw:space": "cosine"}})
    assert created.status_code == 200, f"chroma refused collection {name!r}: {created.text}"
    collection = str(created.json()["id"])
    ids, vectors, metadatas = [], [], []
    for i, query in enumerate(queries):
        for j in range(CHUNKS_PER_QUERY):
            # Chunk ids are Chroma's; the application's document id lives in the metadata.
            ids.append(f"chunk-{i}-{j}")
            vectors.append(toy_vector(query if j == 0 else f"{query} other {j}", dimensions))
            metadatas.append({"doc_id": f"doc-{i}" if j == 0 else f"doc-{i}-other-{j}"})
    httpx.post(
        f"{url}{API}/{collection}/add",
        json={"ids": ids, "embeddings": vectors, "metadatas": metadatas},
    ).raise_for_status()
    return collection


def delete_chunks(url: str, collection: str, ids: Sequence[str]) -> None:
    """Delete chunks by Chroma's own record ids, through its HTTP API."""
    httpx.post(f"{url}{API}/{collection}/delete", json={"ids": list(ids)}).raise_for_status()
