"""The ``ragcanary`` command line: the typer app and what each command does.

May import every other wing.
"""

from ragcanary.cli.app import app, main

__all__ = ["app", "main"]
