"""Build the demo corpus (src/ragcanary/demo/corpus.jsonl.gz) from standard-library docstrings.

One document per public module, class, function and method that has a docstring, taken
from the running interpreter, so the corpus needs no network. Run it once and commit the
output; the output is deterministic for a given interpreter (sorted, gzip mtime 0).

    python scripts/build_demo_corpus.py [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import inspect
import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

MODULES = (
    "abc",
    "argparse",
    "array",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "collections.abc",
    "concurrent.futures",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email.message",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "getpass",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http.client",
    "io",
    "inspect",
    "itertools",
    "json",
    "locale",
    "logging",
    "math",
    "mimetypes",
    "operator",
    "os",
    "os.path",
    "pathlib",
    "pickle",
    "platform",
    "pprint",
    "queue",
    "random",
    "re",
    "secrets",
    "shlex",
    "shutil",
    "signal",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "timeit",
    "traceback",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "weakref",
    "xml.etree.ElementTree",
    "zipfile",
    "zlib",
)

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src/ragcanary/demo/corpus.jsonl.gz"
# Reprs of default values like <object object at 0x7f...> differ on every run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# A few methods carry huge docstrings; the tail adds bytes, not retrieval value.
MAX_TEXT = 6000


def _doc(obj: Any) -> str | None:
    raw = getattr(obj, "__doc__", None)
    if not isinstance(raw, str) or not raw.strip():
        return None
    return inspect.cleandoc(raw)


def _signature(name: str, obj: Any) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    return name + _ADDRESS.sub("", sig)


def _public_names(module: ModuleType) -> list[str]:
    """The module's ``__all__`` when it has one, else the public names it defines itself."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return sorted({n for n in declared if not n.startswith("_") and hasattr(module, n)})
    return sorted(
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isroutine(obj))
        # C accelerators (_bisect for bisect) define what the Python module exposes.
        and getattr(obj, "__module__", None) in (module.__name__, f"_{module.__name__}", None)
    )


def _document(doc_id: str, obj: Any, *, signature: bool = True) -> dict[str, str] | None:
    text = _doc(obj)
    if text is None:
        return None
    head = _signature(doc_id, obj) if signature else doc_id
    body = f"{head}\n\n{text}"[:MAX_TEXT]
    return {"id": doc_id, "title": doc_id, "text": body}


def _members(prefix: str, cls: type) -> Iterator[dict[str, str]]:
    for name, raw in sorted(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if isinstance(raw, property) or not (inspect.isroutine(raw) or callable(raw)):
            continue
        if inspect.isclass(raw):
            continue
        found = _document(f"{prefix}.{name}", getattr(cls, name, raw))
        if found is not None:
            yield found


def module_documents(modname: str) -> Iterator[dict[str, str]]:
    """Every document of one module: the module itself, its classes, functions and methods."""
    module = importlib.import_module(modname)
    found = _document(modname, module, signature=False)
    if found is not None:
        yield found
    for name in _public_names(module):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        # Re-exported builtins (typing.Text is str) would file str's methods under typing.
        if getattr(obj, "__module__", None) == "builtins" and modname != "builtins":
            continue
        doc_id = f"{modname}.{name}"
        found = _document(doc_id, obj)
        if found is not None:
            yield found
        if inspect.isclass(obj):
            yield from _members(doc_id, obj)


def build(out: Path) -> int:
    """Write the corpus to ``out``; returns the number of documents."""
    docs: dict[str, dict[str, str]] = {}
    for modname in MODULES:
        for doc in module_documents(modname):
            docs.setdefault(doc["id"], doc)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        for doc_id in sorted(docs):
            line = json.dumps(docs[doc_id], ensure_ascii=False, sort_keys=True) + "\n"
            gz.write(line.encode("utf-8"))
    out.write_bytes(buffer.getvalue())
    return len(docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    count = build(args.out)
    size = args.out.stat().st_size
    version = sys.version.split()[0]
    print(f"wrote {count} documents ({size / 1e6:.2f} MB) to {args.out} with Python {version}")


if __name__ == "__main__":
    main()
