"""The local spool file that keeps unsaved runs across a restart while storage is down.

On SIGTERM the daemon writes every run still waiting for storage to the spool, one report
a JSON line; at start it reads them back into the buffer ahead of new runs. The spool is
written whole to a temporary file, fsynced and renamed over the old one, so a crash at any
point leaves either the old spool or the new one, never half of one; it is deleted only once
every run it held is stored. Saving a run twice is harmless (storage keeps the first copy).

The temporary file is made in a new directory beside the spool that only the daemon can write
(``<spool>.<random>.d``, mode 0700, removed after the rename), opened ``O_EXCL | O_NOFOLLOW``:
a link planted where it is written cannot send the runs into another file.

Where it lives: beside a SQLite database (``ragcanary.db.spool.jsonl``); for PostgreSQL in
``$RAGCANARY_SPOOL_DIR`` (default: the working directory, which the container keeps on its
volume) as ``ragcanary-<database>.spool.jsonl``, named from the URL without its password.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy

Report = dict[str, Any]

_TEMPORARY = "spool.jsonl.tmp"


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
        lines = (
            json.dumps(report, separators=(",", ":"), ensure_ascii=False) + "\n"
            for report in reports
        )
        self._write(self.path, (line.encode("utf-8") for line in lines))

    def remove(self) -> None:
        """Delete the spool (every run it held is stored)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _write(self, target: Path, chunks: Iterator[bytes]) -> None:
        """Write ``chunks`` to a new file in a private directory, then rename it to ``target``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # mkdtemp makes a new directory of a random name, mode 0700: nobody else can plant a
        # link where the file is made, nor swap the file before it is renamed.
        private = tempfile.mkdtemp(prefix=self.path.name + ".", suffix=".d", dir=self.path.parent)
        directory = os.open(private, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(_TEMPORARY, flags, 0o600, dir_fd=directory)
            try:
                with os.fdopen(fd, "wb") as out:
                    for chunk in chunks:
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(_TEMPORARY, target, src_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(_TEMPORARY, dir_fd=directory)
                raise
        finally:
            os.close(directory)
            with contextlib.suppress(OSError):
                os.rmdir(private)
        _fsync_directory(target.parent)


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
