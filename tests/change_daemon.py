"""A `ragcanary serve` for the declared-change tests: one suite of three labelled canaries on
two targets of one retriever, ``docs`` (the one changes touch) and ``other`` (left alone)."""

from __future__ import annotations

import json
from pathlib import Path

from daemon_harness import DaemonProcess, free_port
from retrievers import target_entry

QUERIES = [f"question {i}" for i in range(3)]
CHANGED = ("core", "docs")  # the pair the change touches
UNTOUCHED = ("core", "other")  # the same retriever, undeclared
REINDEX = {"kind": "reindex", "description": "rebuild the docs index", "targets": ["docs"]}


def change_daemon(
    directory: Path, storage: str, url: str, api_key: str, admin: str
) -> DaemonProcess:
    """The daemon's config written in ``directory`` (not started): runs every second, the
    retriever at ``url`` asked with ``api_key``, ``admin`` its admin token."""
    directory.mkdir(parents=True, exist_ok=True)
    cases = [{"id": f"c{i}", "query": q, "relevant": [f"rel-{i}"]} for i, q in enumerate(QUERIES)]
    (directory / "cases.yaml").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    port = free_port()
    suite = {"cases": "cases.yaml", "targets": ["docs", "other"], "every": "1s", "k": [1, 5]}
    config = {
        "storage": storage,
        "listen": f"127.0.0.1:{port}",
        "targets": {t: target_entry(url, retries=0) for t in ("docs", "other")},
        "suites": {"core": suite},
    }
    (directory / "ragcanary.yaml").write_text(json.dumps(config), encoding="utf-8")
    env = {"VENDOR_KEY": api_key, "RAGCANARY_ADMIN_TOKEN": admin}
    return DaemonProcess(directory / "ragcanary.yaml", port, env)
