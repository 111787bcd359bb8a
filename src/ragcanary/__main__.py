"""The ``ragcanary`` command, and ``python -m ragcanary``.

Start-up imports make hundreds of thousands of objects (modules, classes, functions) that live
as long as the process, so the garbage collector's passes over them find nothing. None runs
until a command has imported what it needs (``cli.common.running``), which then moves them out
of the collector's sight (``gc.freeze``) for the passes of its own work; the same is done on
the way out, as the interpreter's last pass would visit every object once more. Together they
took about 0.2 s off the 1.8 s of a 1,000-canary ``ragcanary run`` (measured with
alternated runs; the cycle section of docs/performance.md times the whole command).
This module imports nothing else first, so that the collector is off before the CLI's imports.
"""

import gc


def main() -> None:
    """Run the command line."""
    gc.disable()
    try:
        from ragcanary.cli.app import main as command

        command()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
