"""Running ``ragcanary`` on a pseudo-terminal of a given width, as an engineer at a shell would."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def in_a_terminal(
    args: list[str], cwd: Path, env: Mapping[str, str], columns: int = 120
) -> tuple[int, str]:
    """Exit code and everything written of ``ragcanary ARGS`` run on a pseudo-terminal
    ``columns`` wide (rich takes the width from COLUMNS)."""
    main, secondary = pty.openpty()
    environ = {**os.environ, **env, "TERM": "xterm-256color", "COLUMNS": str(columns)}
    command = [sys.executable, "-m", "ragcanary", *args]
    with subprocess.Popen(
        command, cwd=cwd, env=environ, stdout=secondary, stderr=secondary
    ) as child:
        os.close(secondary)
        written = bytearray()
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            written += chunk
        code = child.wait(timeout=60)
    os.close(main)
    return code, written.decode("utf-8", "replace")
