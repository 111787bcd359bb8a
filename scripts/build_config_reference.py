"""Write docs/config.md, the reference of every config and suite field, from the models.

    .venv/bin/python scripts/build_config_reference.py          # rewrite docs/config.md
    .venv/bin/python scripts/build_config_reference.py --check  # exit 1 if it is stale

Types, defaults and allowed values come from the pydantic models (and the suite's Case); the
words come from DESCRIPTIONS below. A field without a description stops the script, so a new
field cannot reach the page undocumented (tests/test_config_reference.py runs --check).
"""

# ruff: noqa: E501  (DESCRIPTIONS holds one line of prose per field, as the page shows it)
from __future__ import annotations

import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ragcanary.config.fetch import FetchConfig
from ragcanary.config.judges import JudgeConfig
from ragcanary.config.model import (
    CandidatesConfig,
    Config,
    EmbeddingConfig,
    Redaction,
    SuiteConfig,
    TargetConfig,
    Thresholds,
)
from ragcanary.config.slo import SloConfig
from ragcanary.measure.cases import Case
from ragcanary.probe.runner import PACE, PACED_GAP_BELOW_S, START_SPREAD_S

PAGE = Path(__file__).resolve().parent.parent / "docs" / "config.md"

# field -> (what it does, an example value as written in YAML)
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "Config.storage": (
        'Where runs, their rankings and baselines are kept (docs/architecture.md, "Storage"). '
        "Env: `RAGCANARY_STORAGE`.",
        "postgresql+psycopg://ragcanary@db/ragcanary",
    ),
    "Config.listen": (
        "HOST:PORT of `serve`'s /metrics and API. Env: `RAGCANARY_LISTEN`; `serve --listen` overrides both.",
        "0.0.0.0:9464",
    ),
    "Config.ui_url": (
        "The base URL people open the web pages (`/ui/`) at, when it is not `listen` (a proxy, an ingress); the daemon cannot know it. Links from alerts and dashboards are built on it: `UI_URL/ui/latest?suite=S&target=T`, `UI_URL/ui/diff?suite=S&target=T`. Exported as `ragcanary_ui_info{url}`, which the alert rules' `ui_url` annotation and the dashboards' `ui_url` variable read; unset, `http://LISTEN` is exported when `listen` names one host, and nothing for 0.0.0.0 or `::`. Env: `RAGCANARY_UI_URL`.",
        "https://ragcanary.example.com",
    ),
    "Config.runbook_base_url": (
        "Where alerts link their runbooks, when not on the daemon: a wiki or docs site that serves the page of each alert at `RUNBOOK_BASE_URL/ALERT` (e.g. `/RagCanaryHitRateDrop`). Exported as `ragcanary_runbook_info{url}`, which the alert rules' `runbook_url` annotation reads; unset, it is `UI_URL/ui/runbooks/ALERT` on the base of `ragcanary_ui_info` (see `ui_url`), where every daemon serves the runbooks of its own version, and empty when neither is known. Env: `RAGCANARY_RUNBOOK_BASE_URL`.",
        "https://wiki.example.com/ragcanary/runbooks",
    ),
    "Config.allowed_hosts": (
        "Host names the API and web pages answer besides their own: `localhost`, an IP address that is loopback or the one a request arrived at (with `listen: 0.0.0.0` any address of the machine or pod, so probes by pod IP work), the host of `listen` and of `ui_url`. A request naming another host gets 421, so that a web page of another site cannot read a daemon on 127.0.0.1 or in a cluster through DNS rebinding; `/metrics` and `/healthz` answer any host (Prometheus and probes use whatever name discovery gives). An entry is a name, an IP address, `.example.com` for that name and every name under it, or `*` for any host (the check off). No scheme, port or path. Kubernetes: the Service's names, as `deploy/kubernetes/base/ragcanary.yaml` lists them; see the section Host names of docs/deploy.md.",
        "[ragcanary, .svc, .svc.cluster.local]",
    ),
    "Config.log_level": ("Log level. Env: `RAGCANARY_LOG_LEVEL`.", "warning"),
    "Config.log_format": (
        "`json` or `console`; unset: console on a terminal, JSON otherwise. Env: `RAGCANARY_LOG_FORMAT`.",
        "json",
    ),
    "Config.admin_token": (
        "Bearer token for `POST /-/reload` and pinning baselines; unset disables both. Set it with `RAGCANARY_ADMIN_TOKEN`, not in the file.",
        "${RAGCANARY_ADMIN_TOKEN}",
    ),
    "Config.ingest_token": (
        "Bearer token the application sends with failure reports to `POST /api/v1/candidates`; it can do nothing else. Unset disables the route. Set it with `RAGCANARY_INGEST_TOKEN`.",
        "${RAGCANARY_INGEST_TOKEN}",
    ),
    "Config.forwarded_allow_ips": (
        "Peers whose `X-Forwarded-For` header names the client that the failure reports' rate limit counts (`candidates.rate_limit`): addresses, networks, or `*` for every peer; a list, or one comma-separated string as uvicorn's `--forwarded-allow-ips`. The client is the right-most address in the header that is not itself listed. From any other peer, and by default (no peer is listed: behind no proxy, a header is only what the sender wrote), the header is ignored and the peer's address counts. List your ingress or load balancer here when the application reaches ragcanary through it, or all reports share its one limit.",
        "[10.0.0.0/8]",
    ),
    "Config.candidates": (
        "Bounds of the failure reports; see *candidates*.",
        "{max_pending: 5000}",
    ),
    "CandidatesConfig.max_pending": (
        "Candidates waiting for review at most; past it the oldest pending are dropped (and counted).",
        "5000",
    ),
    "CandidatesConfig.rate_limit": (
        "Reports a second from one client address (the peer's, or the one a proxy listed in `forwarded_allow_ips` forwarded; never the report's `source`); more answer 429 with `Retry-After`. Checked before the body is parsed, so a client over its limit costs next to nothing.",
        "50/s",
    ),
    "CandidatesConfig.burst": (
        "Reports one client address may send at once before the rate applies.",
        "100",
    ),
    "CandidatesConfig.redact": (
        "Patterns replaced in queries, notes and sources before anything is stored, matched in the text's NFKC form with invisible characters (zero-width space, soft hyphen) passed over; unset: e-mail addresses (also `jo @ example.com`, a full-width at sign) and phone numbers of 7 digits or more (any dashes or spaces between groups, full-width digits, an extension like `x12`), by patterns that run in linear time. Text in which nothing matches is stored as sent. Your own patterns run as written: keep them free of nested or adjacent unbounded repeats, which backtrack on long input.",
        '[{pattern: "ACC-\\d+", replace: "<account>"}]',
    ),
    "Redaction.pattern": ("A Python regular expression.", '"ACC-\\d+"'),
    "Redaction.replace": ("What replaces each match.", "<account>"),
    "Config.retention": ("Runs older than this are pruned (a pinned baseline never is).", "14d"),
    "Config.retention_failed": ("Regressed and unavailable runs are kept this long.", "180d"),
    "Config.embeddings": (
        "OpenAI-compatible embedding endpoints by name; see *embeddings.NAME*.",
        "{minilm: {...}}",
    ),
    "Config.targets": ("Retrievers by name; see *targets.NAME*.", "{docs-search: {...}}"),
    "Config.judges": (
        "Judges by name, which grade documents nobody labelled that entered a canary's top-k; a suite names one with `judge:`. See *judges.NAME* and docs/judgments.md.",
        "{reranker: {...}}",
    ),
    "JudgeConfig.kind": (
        "`rerank`: an endpoint in the Cohere / Jina / TEI `/rerank` shape (`POST {model, query, documents, top_n}` answered `results[{index, relevance_score}]`). `chat`: an OpenAI-compatible `/v1/chat/completions` model, asked with a fixed, versioned grading prompt for one grade 0-3.",
        "rerank",
    ),
    "JudgeConfig.url": (
        "The full endpoint: the `/rerank` URL, or the `/v1/chat/completions` URL. A `user:password@` in it is sent as `Authorization: Basic`; the password is a secret.",
        "http://reranker:8080/rerank",
    ),
    "JudgeConfig.model": ("The `model` sent with every request.", "BAAI/bge-reranker-base"),
    "JudgeConfig.headers": (
        "Sent with every request; `${VAR}` values are secrets, never printed or stored.",
        '{Authorization: "Bearer ${JUDGE_TOKEN}"}',
    ),
    "JudgeConfig.timeout": ("Deadline of one request, all of it.", "60s"),
    "JudgeConfig.retries": (
        "Extra attempts after a timeout, connection error, 408, 429 or 5xx (Retry-After honoured); then the documents are left for a later run and the failure counted (`ragcanary_judge_errors_total`).",
        "1",
    ),
    "JudgeConfig.max_per_run": (
        "Documents graded after one run at most; the rest wait for a later run.",
        "20",
    ),
    "JudgeConfig.max_per_day": (
        "Documents graded in one UTC day at most (all suites using the judge); unset: no daily bound.",
        "500",
    ),
    "JudgeConfig.min_grade_score": (
        "`rerank`: a relevance score below it is grade 0 (not relevant); from it to 1 the range is cut in three equal parts, grades 1, 2 and 3 (docs/judgments.md).",
        "0.3",
    ),
    "JudgeConfig.max_response_bytes": ("Answers larger than this fail the request.", "1000000"),
    "JudgeConfig.verify_tls": ("Check the endpoint's TLS certificate.", "false"),
    "TargetConfig.fetch": (
        "Any target but `chroma` (which reads a document's text from the collection) and `pgvector` (which cannot fetch texts yet): where a judge gets the text of a document, `{url: URL with {id}, text: JMESPath}`. The id is percent-encoded into `url`, sent as a GET with the target's headers; `text` (default `text`) reads the text from the JSON answer. See *targets.NAME.fetch*.",
        '{url: "http://search.internal/docs/{id}", text: "body"}',
    ),
    "FetchConfig.url": (
        "A full http(s) URL with `{id}` where the document id goes.",
        '"http://search.internal/docs/{id}"',
    ),
    "FetchConfig.text": ("JMESPath to the document's text in the JSON answer.", "document.content"),
    "SuiteConfig.judge": (
        "A judge under `judges:` that grades the unlabelled ids entering this suite's labelled canaries' top-k, off the run's critical path; its grades are proposals until a person accepts them (docs/judgments.md).",
        "reranker",
    ),
    "EmbeddingConfig.url": (
        "The `/v1/embeddings` endpoint (OpenAI, Azure OpenAI, vLLM, TEI, Ollama, LiteLLM). A `user:password@` in it is sent as `Authorization: Basic` (not with an Authorization header too); the password is a secret, never printed.",
        "http://embedder:8080/v1/embeddings",
    ),
    "EmbeddingConfig.model": ("The `model` sent with every request.", "all-MiniLM-L6-v2"),
    "EmbeddingConfig.headers": (
        "Sent with every request; `${VAR}` values are secrets, never printed.",
        '{Authorization: "Bearer ${EMBED_TOKEN}"}',
    ),
    "EmbeddingConfig.dimensions": (
        "Sent as `dimensions` when set; an answer of another size fails the batch.",
        "384",
    ),
    "EmbeddingConfig.batch": ("Canary queries per request.", "32"),
    "EmbeddingConfig.timeout": ("Deadline of one request, all of it.", "10s"),
    "EmbeddingConfig.retries": (
        "Extra attempts after a timeout, connection error, 408, 429 or 5xx (Retry-After honoured).",
        "2",
    ),
    "EmbeddingConfig.max_response_bytes": ("Answers larger than this fail the batch.", "100000000"),
    "EmbeddingConfig.verify_tls": ("Check the endpoint's TLS certificate.", "false"),
    "Config.suites": ("Suites by name; see *suites.NAME*.", "{core: {...}}"),
    "TargetConfig.preset": (
        "`http`: any JSON API, described by `body`, `params`, `results`, `id` and `score`."
        " `chroma`: Chroma's REST API (v2) queried with the canary's vector (`embedding:`"
        " required; scores are distances). `qdrant`: `points/query` with the vector (say"
        " `score_order: asc` for a Euclid or Manhattan collection). `milvus`: REST v2"
        " `entities/search` with the vector. `pinecone`: the index host's `/query` with the"
        " vector, or integrated-inference text search without an embedding. `elasticsearch`,"
        " `opensearch`: `/{index}/_search`"
        " with kNN (`embedding:` and `vector_field:`) or BM25 (`text_field:`). `weaviate`:"
        " GraphQL `Get` on a class with nearVector, nearText, bm25 or hybrid (`search:`)."
        " `vespa`: `/search/` with YQL, nearestNeighbor with the vector or userQuery()."
        " `rushdb`: AI search over a label and property, which RushDB embeds. `pgvector`:"
        " SQL on a PostgreSQL table (`dsn:` instead of `url:`; scores are distances). For a"
        " preset, `url` is the server's base URL; see docs/targets.md.",
        "chroma",
    ),
    "TargetConfig.url": (
        "The retriever's endpoint; for a preset, the database server's base URL (`pgvector`"
        " connects with `dsn` instead). A `user:password@` in it is taken off the URL and sent"
        " as `Authorization: Basic` (not with an Authorization header too); the password is a"
        " secret, never printed.",
        "http://127.0.0.1:8088/search",
    ),
    "TargetConfig.collection": (
        "Presets: the collection by name (the index for Elasticsearch and OpenSearch, the"
        " namespace for Pinecone, the class for Weaviate, the schema searched for Vespa, the"
        " label for RushDB).",
        "docs",
    ),
    "TargetConfig.tenant": ("Chroma: the tenant of the collection.", "acme"),
    "TargetConfig.dsn": (
        "pgvector: the PostgreSQL to query, as a `postgresql+psycopg://` (or `postgresql://`)"
        " URL; libpq settings such as `sslmode` go in its query string. Its password is a"
        " secret, never printed.",
        "postgresql+psycopg://reader:${PG_PASSWORD}@db:5432/app",
    ),
    "TargetConfig.table": (
        "pgvector: the table (or view) searched, `name` or `schema.name`; letters, digits and"
        " `_`, matched exactly as written.",
        "public.chunks",
    ),
    "TargetConfig.id_column": (
        "pgvector: the column whose value (as text) is the document id.",
        "doc_id",
    ),
    "TargetConfig.vector_column": (
        "pgvector: the `vector` or `halfvec` column searched; its dimensions must be the"
        " embedding's.",
        "embedding",
    ),
    "TargetConfig.distance": (
        "pgvector: the operator, `cosine` (`<=>`), `l2` (`<->`) or `inner_product` (`<#>`,"
        " the inner product negated); all are distances, lower is better.",
        "inner_product",
    ),
    "TargetConfig.where": (
        "pgvector: one SQL condition the rows must meet; trusted config, run in a read-only"
        " transaction (no `;`, comments or `$` quotes).",
        "tenant = 'acme' AND NOT archived",
    ),
    "TargetConfig.using": (
        "Qdrant, Weaviate: the named vector to search, when the collection has several.",
        "text",
    ),
    "TargetConfig.search": (
        "Weaviate: the search operator, `nearVector` (the default with an embedding),"
        " `nearText`, `bm25` or `hybrid`; it sets `score_order` (a distance for near*).",
        "hybrid",
    ),
    "TargetConfig.rank_profile": (
        "Vespa: the rank profile of the query (`ranking`); for nearestNeighbor, one that"
        " declares the query tensor as an input.",
        "semantic",
    ),
    "TargetConfig.query_tensor": (
        "Vespa: the query tensor nearestNeighbor compares with, sent as `input.query(NAME)`.",
        "query_embedding",
    ),
    "TargetConfig.vector_field": (
        "Elasticsearch, OpenSearch, Milvus, Vespa: the vector field a kNN search reads.",
        "embedding",
    ),
    "TargetConfig.text_field": (
        "Elasticsearch, OpenSearch: the text field of a BM25 `match` search (no embedding)."
        " Weaviate: the property bm25 and hybrid search. Vespa: the field or fieldset"
        " userQuery() searches. RushDB: the property with the embedding index.",
        "content",
    ),
    "TargetConfig.database": ("Chroma, Milvus: the database of the collection.", "prod"),
    "TargetConfig.method": (
        "POST sends `body` as JSON; GET sends `params` in the query string.",
        "GET",
    ),
    "TargetConfig.headers": (
        "Sent with every query; values are secrets (never logged; a returned id that equals one is refused, one that only contains it is kept as returned). `${VAR}` from the environment.",
        '{Authorization: "Bearer ${DOCS_TOKEN}"}',
    ),
    "TargetConfig.body": (
        'JSON body template; `{query}` and `{k}` (the suite\'s depth) are filled in; a value that is exactly `"{k}"` is sent as a number.',
        '{q: "{query}", limit: "{k}"}',
    ),
    "TargetConfig.params": (
        "Query-string template, with the same placeholders as `body`.",
        '{q: "{query}", n: "{k}"}',
    ),
    "TargetConfig.results": ("JMESPath to the list of hits in the answer.", "data.matches"),
    "TargetConfig.id": (
        "JMESPath to the document id inside a hit (at most 512 characters).",
        "metadata.doc_id",
    ),
    "TargetConfig.score": (
        "JMESPath to the score inside a hit; `null` when the target returns none.",
        "relevance",
    ),
    "TargetConfig.embedding": (
        "An endpoint under `embeddings:`. Each run embeds the canary queries there first (a"
        " failure is the query outcome `embedding_error`, an outage, never a regression), and"
        ' a `"{vector}"` value in `body` or `params` becomes the query\'s vector.',
        "minilm",
    ),
    "TargetConfig.lookup": (
        "The generic `http` target only (presets look ids up through their own API): a URL"
        " that answers 200 when the index holds the document `{id}` and 404 when it does not;"
        " the id is percent-encoded into it, `/` included. A path is resolved against `url` as"
        " a browser resolves a link (`/docs/{id}` on its host, `docs/{id}` beside it); a full"
        " http(s) URL is used as written. Sent as a GET with the target's headers, retried like"
        " a query, one id at a time within `rate_limit`: in a run for the judged ids that left"
        " their canary's top-k, in `validate --live` and the daemon's stale-label check for"
        " every relevant id (more than 1000 at once are not asked). Any other answer makes the"
        ' whole lookup "cannot tell". It lets the diagnosis name `index_lost` and the stale'
        " labels `missing`.",
        '"/docs/{id}"',
    ),
    "TargetConfig.score_order": (
        "`desc` when the score is a similarity (higher is better), `asc` when it is a distance"
        " (lower is better). The ranking is always the order returned; this says which side of"
        " a case's `min_score` and `max_score` is the better one. Scores are stored and reported"
        " as returned.",
        "asc",
    ),
    "TargetConfig.timeout": ("Deadline of one query, all of it (connect, answer, body).", "2s"),
    "TargetConfig.concurrency": (
        "Queries in flight at once against this target (shared by its suites). A run sends"
        f" its first queries spread over {START_SPREAD_S * 1000:g} ms; where its queries would"
        f" start less than {PACED_GAP_BELOW_S * 1000:g} ms apart, it keeps them {PACE:g} of"
        " the fastest answer's latency / `concurrency` apart, which never lowers its rate"
        ' (docs/performance.md, "Cycle time").',
        "4",
    ),
    "TargetConfig.rate_limit": (
        "Never more than this many queries per second; unset: no limit.",
        "20/s",
    ),
    "TargetConfig.retries": (
        "Retries of a query on timeout, connect error, 5xx or 429 (Retry-After honoured).",
        "2",
    ),
    "TargetConfig.max_response_bytes": (
        "Answers larger than this (after decompression) are `bad_response`.",
        "2000000",
    ),
    "TargetConfig.verify_tls": ("Verify the target's TLS certificate.", "false"),
    "TargetConfig.follow_redirects": (
        "`same-origin`: follow redirects only to the same scheme, host and port; `any`: also elsewhere, with every configured header dropped.",
        "any",
    ),
    "TargetConfig.endpoints": (
        "Other URLs of the same index (replicas, shards, regions), by name: after each run every canary `url` answered is asked once on each, with the target's other settings, client and limits, and each answer is compared with `url`'s by RBO (report `endpoints`, gauge `ragcanary_endpoint_overlap{endpoint}`; an RBO under `thresholds.min_rank_overlap` is the cause `replica_divergence`). Only `url`'s answers make the run's metrics and verdict. A name is up to 63 letters, digits, `_`, `.` or `-` (it becomes a metric label); not for pgvector, which connects with `dsn`.",
        "{eu: 'http://search-eu:8088/search', us: 'http://search-us:8088/search'}",
    ),
    "SuiteConfig.cases": (
        "The suite file (YAML, JSON or JSONL), relative to the config file.",
        "suites/core.yaml",
    ),
    "SuiteConfig.targets": ("Targets this suite runs against (one job each).", "[docs-search]"),
    "SuiteConfig.every": (
        "Interval between runs (at least 1s); the default when neither `every` nor `cron` is set is 5m.",
        "1m",
    ),
    "SuiteConfig.cron": (
        "A crontab schedule instead of `every` (weekdays: 1 is Monday, 0 and 7 Sunday).",
        '"*/5 * * * *"',
    ),
    "SuiteConfig.k": (
        "Cut-offs reported for Hit@k, P@k, R@k, NDCG@k, AP@k, Judged@k.",
        "[1, 5, 10]",
    ),
    "SuiteConfig.depth": ("Results asked for and stored per query; at least the largest k.", "20"),
    "SuiteConfig.baseline": (
        "`pinned`: compare with the pinned run (the first healthy one until someone pins another); `previous`: with the previous answered run.",
        "previous",
    ),
    "SuiteConfig.min_coverage": (
        "A run with fewer answered queries is `unavailable` (exit 3), never a quality regression.",
        "0.8",
    ),
    "SuiteConfig.gain": (
        "NDCG gain: `linear` like trec_eval, or `exponential` (2^grade - 1).",
        "exponential",
    ),
    "SuiteConfig.thresholds": ("When a run fails; see *thresholds*.", "{max_drop: 0.05}"),
    "SuiteConfig.per_case_metrics": ("Also export per-case Hit@k and RR series (capped).", "true"),
    "Thresholds.hit_rate": ("Absolute floors of Hit@k, by k (each k must be in `k`).", "{5: 0.8}"),
    "Thresholds.precision": ("Absolute floors of P@k, by k.", "{5: 0.2}"),
    "Thresholds.recall": ("Absolute floors of R@k, by k.", "{10: 0.7}"),
    "Thresholds.ndcg": ("Absolute floors of NDCG@k, by k.", "{10: 0.6}"),
    "Thresholds.map": ("Absolute floors of AP@k (MAP), by k.", "{10: 0.5}"),
    "Thresholds.judged": (
        "Absolute floors of Judged@k (the share of the top-k ids that carry a label, grade 0 included), by k: a floor asks for labelling, not for a better retriever. A fall of Judged@k never fails a run by itself.",
        "{10: 0.5}",
    ),
    "Thresholds.mrr": ("Absolute floor of MRR.", "0.5"),
    "Thresholds.bpref": (
        "Absolute floor of bpref (trec_eval's, robust to unlabelled results).",
        "0.5",
    ),
    "Thresholds.max_drop": (
        "A drop of any aggregate metric vs the baseline larger than this, and significant, fails the run.",
        "0.05",
    ),
    "Thresholds.score_drift": (
        "Per (case, id) |score delta| vs the baseline counted as drifted.",
        "0.05",
    ),
    "Thresholds.min_rank_overlap": (
        "Mean RBO vs the baseline below this fails the run; `null` turns it off.",
        "0.5",
    ),
    "Thresholds.significance": (
        "p-value under which the paired permutation test calls a drop real.",
        "0.01",
    ),
    "Thresholds.lost_documents": (
        "How many judged relevant ids the target's index no longer holds (asked in the run, "
        "for the ids that left their canary's top-k) fail the run, whatever the significance "
        "test says; each canary that lost one fails too. 0 turns the check off. Presets that "
        "cannot look ids up never trigger it (the diagnosis says `index_lookup: false`).",
        "0",
    ),
    "Thresholds.embedding_drift": (
        "Embedding drift (1 - mean cosine of the query vectors vs the baseline's) over which "
        "`RagCanaryEmbeddingDrift` fires; not a verdict reason.",
        "0.02",
    ),
    "SuiteConfig.stale_label_runs": (
        "A relevant id that no canary got back in this many answered runs is a stale label (`ragcanary_stale_labels`).",
        "100",
    ),
    "SuiteConfig.slo": (
        "The suite's quality SLO: the share of canary answers that must be good over a rolling window; see *slo* and docs/slo.md.",
        '{objective: 0.99, window: 30d, good: "hit_rate@5"}',
    ),
    "SloConfig.objective": (
        "The share of events promised good, above 0 and below 1. Below 1 - 1/14.4 (about 0.9306) the page (a 14.4x burn) can never fire: 14.4 times the budget is over 100 % of the events.",
        "0.99",
    ),
    "SloConfig.window": (
        "The rolling window the objective holds over (at least 3d, at most `retention`): the budget is 1 - objective of its events; the alerts' factors keep the workbook's shares of it.",
        "28d",
    ),
    "SloConfig.good": (
        "What a good answer is: a metric at 1 (`hit_rate@5`, `mrr`), or at least a floor (`ndcg@10 >= 0.5`); any of hit_rate, precision, recall, ndcg, map at a k in `k`, or mrr. Each answered, labelled canary of an answered run is one event; negative, label-free and unanswered canaries are none.",
        "ndcg@10 >= 0.5",
    ),
    "Case.id": ("Unique id of the canary (what `history --case` takes).", "reset-password"),
    "Case.query": ("The query sent (at most 10,000 characters).", "how do I reset my password"),
    "Case.relevant": (
        "Ids that should come back: a list, or a map id -> grade for graded NDCG; `[]` makes a negative canary; absent: label-free (drift only).",
        "{doc-7: 2, doc-2: 1}",
    ),
    "Case.tags": ("Free tags; aggregates are also reported per tag.", "[billing, negation]"),
    "Case.weight": ("Weight of the case in the aggregates.", "2.0"),
    "Case.min_score": (
        "The top hit should score at least this (on the target's side of better).",
        "0.5",
    ),
    "Case.max_score": (
        "Negative canaries: no hit should score this well; required with `relevant: []`.",
        "0.6",
    ),
}

SECTIONS = (
    ("Top level (`ragcanary.yaml`)", Config),
    ("embeddings.NAME", EmbeddingConfig),
    ("judges.NAME", JudgeConfig),
    ("targets.NAME", TargetConfig),
    ("targets.NAME.fetch", FetchConfig),
    ("suites.NAME", SuiteConfig),
    ("suites.NAME.thresholds", Thresholds),
    ("suites.NAME.slo", SloConfig),
    ("candidates", CandidatesConfig),
    ("candidates.redact items", Redaction),
    ("Suite file cases (`cases:` items)", Case),
)


# Required by a validator but for some targets: their model default only stands for "not given".
REQUIRED_UNLESS = {"TargetConfig.url": "required (but for `pgvector`)"}


def _fields(model: Any) -> list[tuple[str, str, str, str]]:
    """(name, type, default, allowed values) of every field of ``model``."""
    rows = []
    if isinstance(model, type) and issubclass(model, BaseModel):
        written = typing.get_type_hints(model, include_extras=True)  # as in the source
        for name, field in model.model_fields.items():
            if field.default is not PydanticUndefined:
                default = field.default
            elif field.default_factory is not None:
                default = field.default_factory()  # type: ignore[call-arg]
            else:
                default = "(required)"
            validators = " ".join(map(str, field.metadata)) + str(written[name])
            kind = _kind(written[name])
            if "_duration" in validators or "_interval" in validators:
                kind = "duration (30s, 5m, 1h, 7d)" + (" or null" if "null" in kind else "")
                default = _duration(default)
            elif "_rate" in validators:
                kind = "rate (20/s, 600/m)" + (" or null" if "null" in kind else "")
            shown = REQUIRED_UNLESS.get(f"{model.__name__}.{name}") or _shown(default)
            rows.append((name, kind, shown, _allowed(field.annotation)))
    else:
        hints = typing.get_type_hints(model)
        for field in dataclasses.fields(model):
            missing = field.default is dataclasses.MISSING
            default = "(required)" if missing else field.default
            rows.append(
                (field.name, _kind(hints[field.name]), _shown(default), _allowed(hints[field.name]))
            )
    return rows


def _duration(seconds: Any) -> Any:
    """``seconds`` as a config duration (``30d``, ``5m``), or as it was when it is none."""
    if not isinstance(seconds, int | float):
        return seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _kind(annotation: Any) -> str:
    names = {float: "number", int: "integer", str: "text", bool: "true/false"}
    if annotation in names:
        return names[annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of the values listed"
    if origin in (typing.Union, types.UnionType):
        kinds = [_kind(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin is typing.Annotated:
        base = args[0]
        meta = " ".join(map(str, args[1:]))
        if "_duration" in meta or "_interval" in meta:
            return "duration (30s, 5m, 1h, 7d)"
        if "_rate" in meta:
            return "rate (20/s, 600/m)"
        return _kind(base)
    if origin in (list, tuple):
        return f"list of {_kind(args[0])}" if args else "list"
    if origin is dict or (origin is not None and "Mapping" in str(origin)):
        return "map" if len(args) < 2 else f"map of {_kind(args[0])} to {_kind(args[1])}"
    if annotation is typing.Any:
        return "any JSON value"
    return getattr(annotation, "__name__", str(annotation))


def _allowed(annotation: Any) -> str:
    for part in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(part) is typing.Literal:
            return ", ".join(f"`{v}`" for v in typing.get_args(part))
    return ""


def _shown(value: Any) -> str:
    if value == "(required)":
        return "required"
    if isinstance(value, BaseModel):
        return "(see below)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value not in ({}, [], ()) else "empty"


def render() -> str:
    missing = [
        f"{model.__name__}.{row[0]}"
        for _, model in SECTIONS
        for row in _fields(model)
        if f"{model.__name__}.{row[0]}" not in DESCRIPTIONS
    ]
    if missing:
        raise SystemExit(
            f"no description for {', '.join(missing)}: add one to DESCRIPTIONS in {__file__}"
        )
    out = [
        "# Configuration reference",
        "",
        "Generated from the models by `scripts/build_config_reference.py`; do not edit by hand.",
        "Every field has a default unless it says *required*. `${VAR}` in any string value is",
        "read from the environment; `$${` is a literal `${`. Durations are like `30s`, `5m`,",
        "`1h`, `7d` (1s to 3650d). Config and suite files may be at most 10 MB; YAML anchors and",
        "aliases are refused; a key given twice is an error.",
    ]
    for title, model in SECTIONS:
        out += [
            "",
            f"## {title}",
            "",
            "| field | type | default | allowed | what it does | example |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, kind, default, allowed in _fields(model):
            text, example = DESCRIPTIONS[f"{model.__name__}.{name}"]
            cell = example.replace("|", "\\|")
            out.append(f"| `{name}` | {kind} | {default} | {allowed} | {text} | `{cell}` |")
    return "\n".join(out) + "\n"


def main() -> int:
    page = render()
    if "--check" in sys.argv:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is stale: run .venv/bin/python scripts/build_config_reference.py")
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
