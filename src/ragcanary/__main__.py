"""Entry point for ``python -m ragcanary``."""

from ragcanary.cli.app import main

main()
