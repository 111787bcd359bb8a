"""The marker of a report key that is left out, where ``null`` would say something else."""

from __future__ import annotations

import enum
from typing import Final


class Absent(enum.Enum):
    """A key the report leaves out, where ``null`` says something else (``stale_labels``:
    left out when the daemon did not look, ``null`` when it could not tell)."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT
