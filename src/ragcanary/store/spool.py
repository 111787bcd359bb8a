"""The local spool file that keeps unsaved runs across a restart while storage is down.

On SIGTERM the daemon writes every run still waiting for storage to the spool, one report
a JSON line; at start it reads them back into the buffer ahead of new runs. The spool is
written whole to a temporary file, fsynced and renamed over the old one, so a crash at any
point leaves either the old spool or the new one, never half of one; it is deleted only once
every run it held is stored. Saving a run twice is harmless (storage keeps the first copy).

Where it lives: beside a SQLite database (``ragcanary.db.spool.jsonl``); for PostgreSQL in
``$RAGCANARY_SPOOL_DIR`` (default: the working directory, which the container keeps on its
volume) as ``ragcanary-<database>.spool.jsonl``, named from the URL without its password.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy

Report = dict[str, Any]


def spool_path(storage_url: str, environ: Mapping[str, str]) -> Path:
    """Where the spool of the database at ``storage_url`` lives."""
    url = sqlalchemy.make_url(storage_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).with_name(Path(url.database).name + ".spool.jsonl")
    identity = url.render_as_string(hide_password=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    name = f"ragcanary-{url.database or 'db'}-{digest}.spool.jsonl"
    return Path(environ.get("RAGCANARY_SPOOL_DIR") or ".") / name


class Spool:
    """One spool file: read what a previous process left, replace it, or remove it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[list[Report], int]:
        """The reports in the spool, oldest first, and how many lines could not be read."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return [], 0
        reports, unreadable = [], 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                report = json.loads(line)
            except ValueError:
                unreadable += 1
                continue
            if isinstance(report, dict) and isinstance(report.get("run_id"), str):
                reports.append(report)
            else:
                unreadable += 1
        return reports, unreadable

    def replace(self, reports: Sequence[Report]) -> None:
        """Make the spool hold exactly ``reports``; an empty list removes it.

        Raises OSError when the directory cannot be written; the old spool is then intact.
        """
        if not reports:
            self.remove()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            for report in reports:
                out.write(json.dumps(report, separators=(",", ":"), ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
        _fsync_directory(self.path.parent)

    def remove(self) -> None:
        """Delete the spool (every run it held is stored)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` survive a power loss (where the platform allows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
