"""Serve the demo retriever: ``python -m ragcanary.demo --port 8088 --mode drop-docs``."""

from __future__ import annotations

import argparse

from ragcanary.demo.retriever import MODES, serve


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m ragcanary.demo",
        description="BM25 demo retriever over Python standard-library docstrings.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8088, help="port to listen on")
    parser.add_argument(
        "--mode", choices=MODES, default="normal", help="incident to imitate from the start"
    )
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, mode=args.mode)


if __name__ == "__main__":
    main()
