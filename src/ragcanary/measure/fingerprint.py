"""What a run was made with (its ``fingerprint``), and what differs between two of them.

A fingerprint names the configuration a run measured (hashes of the config, the suite and the
target's settings), the embedding model and the length of the vectors it sent, and what the
index said of itself when the preset can tell cheaply: how many records it holds and its
search settings. A value the run could not tell is None and is never compared: a report
without a fingerprint (older than it) or a count the index did not give says nothing changed
or not. Pure: the probe and the config fill it in (``probe/cycle.py``, ``suites/fingerprint.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Setting = str | int | float | bool


@dataclass(frozen=True)
class IndexState:
    """What an index said of itself: its record count and its search settings (None: it
    could not tell)."""

    documents: int | None = None
    settings: Mapping[str, Setting] | None = None


@dataclass(frozen=True)
class Fingerprint:
    """What one run was made with (the report's ``fingerprint``; docs/report.md)."""

    config_hash: str
    suite_hash: str
    target_hash: str
    embedding_model: str | None = None  # None: the target has no embedding: endpoint
    embedding_dimensions: int | None = None  # None: no query vector was made this run
    documents: int | None = None  # None: the preset cannot tell, or the index did not say
    index_settings: Mapping[str, Setting] | None = None


@dataclass(frozen=True)
class FingerprintChange:
    """One thing two fingerprints differ in: the field, both values, and a line saying so."""

    field: str
    before: object
    after: object
    text: str


def fingerprint_changes(
    before: Fingerprint | None, after: Fingerprint | None
) -> tuple[FingerprintChange, ...]:
    """What differs from ``before`` to ``after``, what matters most first: the embedding
    model and its vectors, the index, then the target's, the suite's and the whole config's
    hashes. Nothing for a run without a fingerprint, nor for a value either run lacks."""
    if before is None or after is None:
        return ()
    changes: list[FingerprintChange] = []
    if before.embedding_model != after.embedding_model:
        changes.append(
            _change(
                "embedding_model",
                before.embedding_model,
                after.embedding_model,
                f"embedding model {before.embedding_model or 'none'} → "
                f"{after.embedding_model or 'none'}",
            )
        )
    old, new = before.embedding_dimensions, after.embedding_dimensions
    if old is not None and new is not None and old != new:
        changes.append(
            _change("embedding_dimensions", old, new, f"embedding dimensions {old} → {new}")
        )
    old, new = before.documents, after.documents
    if old is not None and new is not None and old != new:
        text = f"documents {old:,} → {new:,} ({new - old:+,})"
        changes.append(_change("documents", old, new, text))
    changes.extend(_settings_changes(before.index_settings, after.index_settings))
    for name, label in (
        ("target_hash", "target settings"),
        ("suite_hash", "suite (cases or settings)"),
        ("config_hash", "config"),
    ):
        old_hash, new_hash = getattr(before, name), getattr(after, name)
        if old_hash != new_hash:
            changes.append(_change(name, old_hash, new_hash, f"{label} {old_hash} → {new_hash}"))
    return tuple(changes)


def _settings_changes(
    before: Mapping[str, Setting] | None, after: Mapping[str, Setting] | None
) -> list[FingerprintChange]:
    if before is None or after is None:
        return []
    return [
        _change(
            f"index_settings.{key}",
            before.get(key),
            after.get(key),
            f"index setting {key} {_setting(before.get(key))} → {_setting(after.get(key))}",
        )
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def _setting(value: Setting | None) -> str:
    return "unset" if value is None else str(value)


def _change(name: str, before: object, after: object, text: str) -> FingerprintChange:
    return FingerprintChange(name, before, after, text)


# What a pinned baseline is checked against: what the current config decides of its pair.
# Not the whole config's hash: it moves with settings that change nothing a pair measures
# (listen, storage, another suite) and with what only the daemon's environment sets (an admin
# token, RAGCANARY_* overrides), so `baseline show` run elsewhere would flag every baseline.
CONFIG_FIELDS = ("embedding_model", "target_hash", "suite_hash")


def config_changes(
    pinned: Fingerprint | None, current: Fingerprint
) -> tuple[FingerprintChange, ...]:
    """What of the config changed since ``pinned`` was measured, against ``current`` (computed
    from the config now: no counts, no vectors); nothing when ``pinned`` has no fingerprint."""
    return tuple(c for c in fingerprint_changes(pinned, current) if c.field in CONFIG_FIELDS)
