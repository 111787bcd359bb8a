"""The local spool file that keeps unsaved runs across a restart while storage is down.

On SIGTERM the daemon writes every run still waiting for storage to the spool, one report
a JSON line; at start it reads them back into the buffer ahead of new runs. The spool is
written whole to a temporary file, fsynced and renamed over the old one, so a crash at any
point leaves either the old spool or the new one, never half of one; it is deleted only once
every run it held is stored. Saving a run twice is harmless (storage keeps the first copy).

The temporary file is made in a new directory beside the spool that only the daemon can write
(``<spool>.<random>.d``, mode 0700, removed after the rename), opened ``O_EXCL | O_NOFOLLOW``:
a link planted where it is written cannot send the runs into another file. The spool itself is
never read through a symbolic link, and a FIFO in its place does not block the start.

What a start cannot read stops nothing: a line that is not UTF-8 (a file cut inside a
character), not JSON, nested deeper than any report, or not a report is skipped, and so is a
spool that is a directory, a link or unreadable. ``read`` says what it skipped and why;
``set_aside`` keeps the spool as it was under a new name ending in ``.bad`` beside it, so that
nothing is lost, while the readable runs are stored.

Where it lives: beside a SQLite database (``ragcanary.db.spool.jsonl``); for PostgreSQL in
``$RAGCANARY_SPOOL_DIR`` (default: the working directory, which the container keeps on its
volume) as ``ragcanary-<database>.spool.jsonl``, named from the URL without its password.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy

from ragcanary.measure.report_json import marshal, unmarshal
from ragcanary.measure.run_report import RunReport
from ragcanary.store.rows import run_row

Report = RunReport

# Reports nest a few levels (cases, their metrics and comparisons); a line nested deeper is
# not one, and decoding or encoding it again could exhaust the stack where it is stored.
MAX_DEPTH = 32
_TEMPORARY = "spool.jsonl.tmp"
_ASIDE_TRIES = 1000


def spool_path(storage_url: str, environ: Mapping[str, str]) -> Path:
    """Where the spool of the database at ``storage_url`` lives."""
    url = sqlalchemy.make_url(storage_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).with_name(Path(url.database).name + ".spool.jsonl")
    identity = url.render_as_string(hide_password=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    name = f"ragcanary-{url.database or 'db'}-{digest}.spool.jsonl"
    return Path(environ.get("RAGCANARY_SPOOL_DIR") or ".") / name


@dataclass(frozen=True)
class Skipped:
    """What of a spool could not be read: one line (``line``, from 1) or all of it (None)."""

    line: int | None
    reason: str


@dataclass(frozen=True)
class Contents:
    """What ``Spool.read`` found: the reports, oldest first, and what it skipped."""

    reports: list[Report] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    data: bytes = field(default=b"", repr=False)  # the spool's bytes, when it was a file

    @property
    def whole(self) -> bool:
        """Whether the spool could not be read at all (not a file, a link, unreadable)."""
        return any(s.line is None for s in self.skipped)


class Spool:
    """One spool file: read what a previous process left, replace it, or remove it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # The spool holds something unreadable that could not be kept aside: it is then
        # neither replaced nor removed, so that nothing in it is lost.
        self._holds_unkept = False

    def read(self) -> Contents:
        """The reports in the spool and what could not be read; changes nothing on disk."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return Contents()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return _whole("is a symbolic link, and a spool is never read through one")
            return _whole(f"cannot be opened ({exc.strerror})")
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                return _whole("is a directory, not a file")
            if not stat.S_ISREG(mode):
                return _whole("is not a regular file (a FIFO, socket or device)")
            with os.fdopen(fd, "rb") as file:
                fd = -1  # the file object closes it now
                data = file.read()
        except OSError as exc:
            return _whole(f"cannot be read ({exc.strerror})")
        finally:
            if fd >= 0:
                os.close(fd)
        return _parse(data)

    def set_aside(self, contents: Contents) -> Path:
        """Keep the spool as ``read`` found it under a new ``.bad`` name beside it; that path.

        A file is linked there (or, where links are refused, copied), and the spool then holds
        only its readable runs until they are stored; anything else (a directory, a link) is
        renamed. Raises OSError when none of that can be done: the spool is then neither
        replaced nor removed later.
        """
        try:
            if contents.whole:
                return self._rename_aside()
            kept = self._link_aside(contents.data)
        except OSError:
            self._holds_unkept = True
            raise
        # Should this fail, the spool keeps its unreadable lines too, which are safe in the
        # .bad file already: a later start only sets them aside once more.
        with contextlib.suppress(OSError):
            self.replace(contents.reports)
        return kept

    def replace(self, reports: Sequence[Report]) -> None:
        """Make the spool hold exactly ``reports``; an empty list removes it.

        Raises OSError when the directory cannot be written; the old spool is then intact.
        """
        if self._holds_unkept:
            raise OSError(
                errno.EEXIST,
                f"{self.path} holds lines that could not be read nor kept aside; "
                "move it away so that the daemon can spool again",
            )
        if not reports:
            self.remove()
            return
        self._write(self.path, (_line(report) for report in reports))

    def remove(self) -> None:
        """Delete the spool (every run it held is stored).

        Raises OSError when it cannot be deleted; a spool holding something unreadable that
        could not be kept aside stays.
        """
        if self._holds_unkept:
            return
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

    def _aside_names(self) -> Iterator[Path]:
        yield self.path.with_name(self.path.name + ".bad")
        for number in range(2, _ASIDE_TRIES):
            yield self.path.with_name(f"{self.path.name}.{number}.bad")

    def _rename_aside(self) -> Path:
        for aside in self._aside_names():
            if not os.path.lexists(aside):
                os.rename(self.path, aside)  # renames a link itself, never what it points to
                _fsync_directory(self.path.parent)
                return aside
        raise OSError(errno.EEXIST, f"no free name for {self.path}.bad: clear the old ones")

    def _link_aside(self, data: bytes) -> Path:
        for aside in self._aside_names():
            try:
                os.link(self.path, aside, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                break  # this filesystem makes no links: copy instead
            _fsync_directory(self.path.parent)
            return aside
        for aside in self._aside_names():
            if not os.path.lexists(aside):
                self._write(aside, iter((data,)))
                return aside
        raise OSError(errno.EEXIST, f"no free name for {self.path}.bad: clear the old ones")


def _line(report: Report) -> bytes:
    """One spool line of ``report``: UTF-8 JSON, ``\\u`` escapes where UTF-8 cannot hold the
    text (a lone surrogate in an id or an error a target sent)."""
    data = marshal(report)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(data, separators=(",", ":")).encode("ascii") + b"\n"


def _whole(reason: str) -> Contents:
    return Contents(skipped=[Skipped(None, reason)])


def _parse(data: bytes) -> Contents:
    """The reports of a spool's bytes, one JSON line each, and the lines that are none."""
    contents = Contents(data=data)
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        report, reason = _report(raw)
        if report is None:
            contents.skipped.append(Skipped(number, reason))
        else:
            contents.reports.append(report)
    return contents


def _report(raw: bytes) -> tuple[Report | None, str]:
    """One line's report, or None and why it is none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"is not UTF-8 at byte {exc.start + 1} (cut inside a character?)"
    try:
        data = json.loads(text)
    except RecursionError:
        return None, f"is nested deeper than any report (over {MAX_DEPTH} levels)"
    except ValueError as exc:
        return None, f"is not JSON ({exc})"
    if _depth(data) > MAX_DEPTH:
        return None, f"is nested deeper than any report (over {MAX_DEPTH} levels)"
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None, "is not a run report (an object with a run_id)"
    report = unmarshal(data)
    try:
        run_row(report, marshal(report))  # else storage would refuse it, and it would be lost
    except ValueError as exc:
        return None, f"is not a run report that can be stored ({exc})"
    return report, ""


def _depth(value: Any) -> int:
    """How deep lists and objects nest in a decoded JSON value (without recursing)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


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
