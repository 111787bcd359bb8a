"""Check that the unit and e2e lanes of tests hold, between them, every test exactly once.

    .venv/bin/python scripts/check_lanes.py "not e2e" "e2e"   # the Makefile's two selections

Collects the suite three times (whole, then as each lane selects it with `pytest -m`) and
exits 1 naming every test that neither lane runs or both do, so that no test is lost between
`make unit` and `make e2e`. `make lanes` (part of `make test`) runs it with the Makefile's
own UNIT_MARKS and E2E_MARKS; tests/lanes.py says which tests are e2e.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def problems(everything: Sequence[str], unit: Sequence[str], e2e: Sequence[str]) -> list[str]:
    """One line per test that is in neither lane or in both, or that only a lane collects."""
    whole, fast, slow = set(everything), set(unit), set(e2e)
    found = [f"in neither lane: {test}" for test in everything if test not in fast | slow]
    found += [f"in both lanes: {test}" for test in everything if test in fast & slow]
    found += [f"not in the whole suite: {test}" for test in sorted((fast | slow) - whole)]
    for name, lane in (("unit lane", unit), ("e2e lane", e2e), ("whole suite", everything)):
        twice = sorted(test for test, count in Counter(lane).items() if count > 1)
        found += [f"collected twice in the {name}: {test}" for test in twice]
    return found


def _collecting(*args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    return subprocess.Popen(
        [*command, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _test_ids(process: subprocess.Popen[str], what: str) -> list[str]:
    """The test ids a `--collect-only -q` printed, before its blank line and summary."""
    output, _ = process.communicate()
    # 5: no test collected, which a lane may be; anything else is a collection that failed.
    if process.returncode not in (0, 5):
        sys.exit(f"collecting {what} failed (pytest exit {process.returncode}):\n{output}")
    ids = []
    for line in output.splitlines():
        if not line.strip():
            break
        ids.append(line)
    return ids


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    unit_marks, e2e_marks = argv
    # The three collections at once: each spends its seconds importing the test modules.
    collecting = {
        "the whole suite": _collecting(),
        f"the unit lane (-m {unit_marks!r})": _collecting("-m", unit_marks),
        f"the e2e lane (-m {e2e_marks!r})": _collecting("-m", e2e_marks),
    }
    everything, unit, e2e = (_test_ids(p, what) for what, p in collecting.items())
    found = problems(everything, unit, e2e)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} problem(s): fix the marks (tests/lanes.py) or the Makefile's lanes")
        return 1
    print(f"{len(everything)} tests: {len(unit)} in the unit lane, {len(e2e)} in the e2e lane")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
