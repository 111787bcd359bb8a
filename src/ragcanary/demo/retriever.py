"""The demo retriever: BM25 over the demo corpus, served over HTTP, with incident modes.

``POST /search`` answers a query; ``POST /search?variant=rewrite`` and ``?variant=truncated``
answer it with another retrieval strategy over the same corpus (for ``ragcanary compare``);
``GET /docs/{id}`` answers 200 with a document the index
holds and 404 with one it does not (in mode ``drop-docs``, the dropped shards'), which the
demo config's ``lookup:`` asks so that a run names the documents that left the index.
"""

from __future__ import annotations

import hashlib
import random
import re
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Literal

import bm25s
import numpy as np
import numpy.typing as npt
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragcanary.demo.corpus import Doc, load_corpus
from ragcanary.errors import RagcanaryError, UsageError

Mode = Literal["normal", "drop-docs", "shift-scores", "shuffle", "down"]
# Retrieval strategies the demo serves side by side: plain BM25; the query rewritten with the
# title of its first hit (pseudo-relevance feedback); an index of each document's title and
# only the first TRUNCATED_CHARS characters of its text, as a chunker that keeps one chunk.
Variant = Literal["bm25", "rewrite", "truncated"]
TRUNCATED_CHARS = 80
MODES: tuple[Mode, ...] = ("normal", "drop-docs", "shift-scores", "shuffle", "down")

# BM25 is unbounded; s / (s + SCORE_SCALE) maps it monotonically into (0, 1) so that the demo's
# scores read like an embedding retriever's: on the demo suite the top hit of a real question
# scores 0.55-0.82 (median 0.71) and of an off-topic one at most 0.6, so thresholds such as
# max_score 0.65 or a drift of 0.05 mean something.
SCORE_SCALE = 3.0
_DIGITS = 6  # scores are rounded so that JSON answers are stable and ties are exact
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(bm25s.stopwords.STOPWORDS_EN)
_SUFFIXES = ("ing", "ed", "es", "s", "e")


def stem(word: str) -> str:
    """A light stemmer: strip one inflection so "parse", "parsed" and "parses" meet.

    bm25s ships no stemmer and the demo adds no dependency for one; this crude rule set
    is enough for docstrings and developer questions.
    """
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed alphanumeric words; underscores and dots split identifiers."""
    words = _WORD.findall(text.lower())
    return [stem(w) for w in words if len(w) > 1 and w not in _STOPWORDS]


def shard_of(doc_id: str) -> str:
    """The shard a document is stored in: its top-level module (``os`` for ``os.path.join``)."""
    return doc_id.split(".", 1)[0]


def drop_share(doc_id: str) -> float:
    """A stable position in [0, 1) of the document's shard; ``drop-docs`` loses those below."""
    digest = hashlib.blake2b(shard_of(doc_id).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def is_dropped(doc_id: str, fraction: float) -> bool:
    """Whether ``drop-docs`` with this fraction removes ``doc_id`` from the index.

    Whole shards go missing, as when a backfill skips a partition: a topic's documents
    vanish together, so the loss shows on the canaries instead of hiding behind siblings.
    """
    return drop_share(doc_id) < fraction


@dataclass(frozen=True)
class Hit:
    """One search result."""

    id: str
    score: float
    title: str


class Index:
    """A BM25 index (bm25s) over documents' titles and texts; build once, search many times."""

    def __init__(self, docs: Sequence[Doc], scale: float = SCORE_SCALE) -> None:
        self.docs = tuple(docs)
        self.scale = scale
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenize(f"{d.title}\n{d.text}") for d in self.docs], show_progress=False)
        self._share = np.array([drop_share(d.id) for d in self.docs])
        self._by_id = {d.id: d for d in self.docs}
        # Ties in score are broken by id, so rank every document by id once.
        order = sorted(range(len(self.docs)), key=lambda i: self.docs[i].id)
        self._id_rank = np.empty(len(self.docs), dtype=np.int64)
        self._id_rank[order] = np.arange(len(self.docs))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """The normalised score of every document for ``query`` (0 where nothing matches)."""
        tokens = tokenize(query)
        if not tokens:
            return np.zeros(len(self.docs))
        raw = np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)
        return np.round(raw / (raw + self.scale), _DIGITS)

    def search(self, query: str, limit: int, drop_fraction: float = 0.0) -> list[Hit]:
        """The ``limit`` best documents, score descending then id; ``drop_fraction`` loses docs."""
        scores = self.scores(query)
        if drop_fraction > 0:
            scores[self._share < drop_fraction] = 0.0
        matched = np.flatnonzero(scores > 0)
        # np.lexsort sorts by its last key first.
        ranked = matched[np.lexsort((self._id_rank[matched], -scores[matched]))][:limit]
        return [
            Hit(id=self.docs[i].id, score=float(scores[i]), title=self.docs[i].title)
            for i in ranked
        ]

    def get(self, doc_id: str, drop_fraction: float = 0.0) -> Doc | None:
        """The document ``doc_id`` if the index holds it; ``drop_fraction`` loses docs as
        ``search`` does."""
        doc = self._by_id.get(doc_id)
        if doc is None or is_dropped(doc_id, drop_fraction):
            return None
        return doc


def rewrite_query(index: Index, query: str) -> str:
    """``query`` with the title of its first hit appended (one round of pseudo-relevance
    feedback), or unchanged when nothing matches."""
    first = index.search(query, 1)
    return f"{query} {first[0].title}" if first else query


def truncated(docs: Sequence[Doc], chars: int = TRUNCATED_CHARS) -> list[Doc]:
    """``docs`` with their texts cut to the first ``chars`` characters."""
    return [replace(d, text=d.text[:chars]) for d in docs]


class _Variants:
    """The index of each variant; the truncated one is built on its first use (a second)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._truncated: Index | None = None
        self._lock = threading.Lock()

    def truncated(self) -> Index:
        with self._lock:
            if self._truncated is None:
                self._truncated = Index(truncated(self.index.docs), self.index.scale)
            return self._truncated


def build_index(docs: Sequence[Doc] | None = None) -> Index:
    """The BM25 index over ``docs``, by default the packaged demo corpus (a second or two)."""
    return Index(load_corpus() if docs is None else docs)


class ModeSettings(BaseModel):
    """Which incident the retriever imitates, with its knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = "normal"
    fraction: float = Field(default=0.4, ge=0, le=1)  # drop-docs: share of the index lost
    shift: float = Field(default=0.15, ge=0, le=1)  # shift-scores: lowered by this, floor 0
    seed: int = 0  # shuffle: seeds the per-query permutation
    depth: int = Field(default=5, ge=2)  # shuffle: how many top hits the broken reranker mixes


def shift_scores(hits: Sequence[Hit], shift: float) -> list[Hit]:
    """A new embedding scale: every score lowered by ``shift``, never below 0; order kept."""
    return [replace(h, score=max(0.0, round(h.score - shift, _DIGITS))) for h in hits]


def shuffle_top(hits: Sequence[Hit], query: str, seed: int, depth: int = 5) -> list[Hit]:
    """A broken reranker: the top ``depth`` hits reordered by a permutation seeded per query.

    Each hit keeps its score, as a reranker's output order disagrees with the first stage's
    scores. A permutation that happens to be the identity is reversed so that every query
    with two or more hits visibly changes.
    """
    top = list(hits[:depth])
    # A str seed is hashed with SHA-512 by random.Random, so it is stable across processes.
    order = list(range(len(top)))
    random.Random(f"{seed}:{query}").shuffle(order)
    if order == sorted(order):
        order.reverse()
    return [top[i] for i in order] + list(hits[depth:])


def answer(index: Index, settings: ModeSettings, query: str, limit: int) -> list[Hit]:
    """The hits the retriever returns for ``query`` in the given mode (``down`` is the caller's)."""
    if settings.mode == "drop-docs":
        return index.search(query, limit, drop_fraction=settings.fraction)
    hits = index.search(query, limit)
    if settings.mode == "shift-scores":
        return shift_scores(hits, settings.shift)
    if settings.mode == "shuffle":
        return shuffle_top(hits, query, settings.seed, settings.depth)
    return hits


def held(index: Index, settings: ModeSettings, doc_id: str) -> Doc | None:
    """The document ``GET /docs/{id}`` returns in the given mode: ``drop-docs`` has lost it
    from the index, as from every search; the other modes hold every document."""
    fraction = settings.fraction if settings.mode == "drop-docs" else 0.0
    return index.get(doc_id, drop_fraction=fraction)


class SearchRequest(BaseModel):
    """The body of ``POST /search``."""

    q: str
    limit: int = Field(default=10, ge=1, le=1000)


class HitOut(BaseModel):
    """One hit in the answer of ``POST /search``."""

    id: str
    score: float
    title: str


class DocOut(BaseModel):
    """The answer of ``GET /docs/{id}``: the document as the index holds it."""

    id: str
    title: str
    text: str


class SearchResponse(BaseModel):
    """The answer of ``POST /search``: hits best first, and the mode that produced them."""

    hits: list[HitOut]
    mode: Mode


@dataclass
class _State:
    """The app's one mutable thing; settings are frozen and replaced whole, so no lock."""

    settings: ModeSettings


def _down() -> JSONResponse:
    """What every route answers in mode ``down``."""
    return JSONResponse(
        {"detail": "retriever is down (demo incident mode 'down')"}, status_code=503
    )


def create_app(mode: Mode = "normal", index: Index | None = None) -> FastAPI:
    """The demo retriever's HTTP API; pass a prebuilt ``index`` to share it between apps."""
    idx = build_index() if index is None else index
    variants = _Variants(idx)
    state = _State(ModeSettings(mode=mode))
    app = FastAPI(title="ragcanary demo retriever", version="1")

    @app.post("/search", response_model=SearchResponse)
    def search(request: SearchRequest, variant: Variant = "bm25") -> SearchResponse | JSONResponse:
        settings = state.settings
        if settings.mode == "down":
            return _down()
        query, searched = request.q, idx
        if variant == "rewrite":
            query = rewrite_query(idx, query)
        elif variant == "truncated":
            searched = variants.truncated()
        hits = answer(searched, settings, query, request.limit)
        return SearchResponse(
            hits=[HitOut(id=h.id, score=h.score, title=h.title) for h in hits], mode=settings.mode
        )

    # :path, so that an id with a percent-encoded / reaches the handler and is not found there.
    @app.get("/docs/{doc_id:path}", response_model=DocOut)
    def get_doc(doc_id: str) -> DocOut | JSONResponse:
        settings = state.settings
        if settings.mode == "down":
            return _down()
        doc = held(idx, settings, doc_id)
        if doc is None:
            return JSONResponse(
                {"detail": f"the index holds no document {doc_id!r}"}, status_code=404
            )
        return DocOut(id=doc.id, title=doc.title, text=doc.text)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        # The process is alive even in mode "down"; only searches fail, like a lost backend.
        return {"status": "ok", "mode": state.settings.mode}

    @app.get("/mode")
    def get_mode() -> ModeSettings:
        return state.settings

    @app.post("/mode")
    def set_mode(settings: ModeSettings) -> ModeSettings:
        state.settings = settings
        return settings

    return app


def serve(host: str = "127.0.0.1", port: int = 8088, mode: Mode = "normal") -> None:
    """Run the demo retriever in the foreground until interrupted."""
    uvicorn.run(create_app(mode), host=host, port=port)


class BackgroundServer:
    """The demo retriever on a background thread: ``with BackgroundServer() as s: s.url``.

    ``port=0`` picks a free port. Startup waits until the port accepts connections;
    leaving the block asks uvicorn to exit and joins its thread.
    """

    def __init__(
        self,
        app: FastAPI | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 8088,
        mode: Mode = "normal",
        index: Index | None = None,
        startup_timeout: float = 15.0,
    ) -> None:
        self.app = create_app(mode, index) if app is None else app
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8088``."""
        return f"http://{self.host}:{self.port}"

    @property
    def search_url(self) -> str:
        """The URL a ragcanary target points at."""
        return f"{self.url}/search"

    def start(self) -> None:
        """Bind, start uvicorn on a thread and wait until it accepts connections."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise UsageError(
                f"the demo retriever cannot listen on {self.host}:{self.port} ({exc.strerror}); "
                "stop what uses that port or choose another one"
            ) from exc
        self.port = sock.getsockname()[1]
        self._socket = sock
        # log_config=None leaves the host process's logging configuration alone.
        config = uvicorn.Config(self.app, log_config=None, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="demo-retriever", daemon=True
        )
        self._thread.start()
        self._wait_until_accepting()

    def _wait_until_accepting(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._thread is None or not self._thread.is_alive():
                self.stop()
                raise RagcanaryError("the demo retriever stopped while starting; see its log")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RagcanaryError(
                    f"the demo retriever did not accept connections on {self.url} "
                    f"within {self.startup_timeout:g}s"
                )
            time.sleep(0.02)

    def stop(self) -> None:
        """Ask uvicorn to exit, join its thread and release the socket."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server, self._thread, self._socket = None, None, None

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
