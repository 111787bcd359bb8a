"""The frozen demo corpus (standard-library docstrings) and the hand-labelled demo suite."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

CORPUS_FILE = "corpus.jsonl.gz"
SUITE_FILE = "suite.yaml"
_PACKAGE = "ragcanary.demo"


@dataclass(frozen=True)
class Doc:
    """One document of the demo corpus; ``id`` is a dotted qualified name such as ``json.dumps``."""

    id: str
    title: str
    text: str


def load_corpus() -> list[Doc]:
    """Read every document of the packaged corpus, in the file's (sorted) order."""
    raw = resources.files(_PACKAGE).joinpath(CORPUS_FILE).read_bytes()
    lines = gzip.decompress(raw).decode("utf-8").splitlines()
    docs = []
    for line in lines:
        record = json.loads(line)
        docs.append(Doc(id=record["id"], title=record["title"], text=record["text"]))
    return docs


def suite_path() -> Path:
    """Where the packaged demo suite file lives on disk (the package is installed unzipped)."""
    return Path(str(resources.files(_PACKAGE).joinpath(SUITE_FILE)))
