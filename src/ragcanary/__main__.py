"""Entry point for ``python -m ragcanary``."""

from ragcanary.cli import main

main()
