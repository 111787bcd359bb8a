"""The store's errors: what its callers catch instead of SQLAlchemy's or a driver's.

RagcanaryError
└── StorageError               the database refused something: a malformed report, an
    │                          unknown run, a schema newer than this ragcanary
    └── StorageUnavailable     the database cannot be reached right now (down, locked,
                               gone); nothing was written, so trying again later is safe
"""

from __future__ import annotations

from ragcanary.errors import RagcanaryError


class StorageError(RagcanaryError):
    """The database refused a request; the message says what and what to do."""


class StorageUnavailable(StorageError):
    """The database cannot be reached right now; the request can be retried later."""
