"""The store's errors: what its callers catch instead of SQLAlchemy's or a driver's.

RagcanaryError
├── StorageError               the database refused something: a malformed report, an
│   │                          unknown run, a schema newer than this ragcanary
│   └── StorageUnavailable     the database cannot be reached right now (down, locked,
│                              gone); nothing was written, so trying again later is safe
└── UsageError
    ├── UnknownRun             no stored run has the id given, nor begins with it
    └── AmbiguousRun           several stored runs begin with the prefix given
"""

from __future__ import annotations

from ragcanary.errors import RagcanaryError, UsageError


class StorageError(RagcanaryError):
    """The database refused a request; the message says what and what to do."""


class StorageUnavailable(StorageError):
    """The database cannot be reached right now; the request can be retried later."""


class UnknownRun(UsageError):
    """No stored run has that id, nor begins with it (API: 404)."""


class AmbiguousRun(UsageError):
    """Several stored runs begin with the prefix given (API: 400); ``candidates``: their ids."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates
