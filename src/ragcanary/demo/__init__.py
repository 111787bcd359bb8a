"""The bundled demo: a real BM25 retriever over standard-library docstrings, and its canary suite.

``corpus`` loads the frozen documents and locates ``suite.yaml``; ``retriever`` indexes them
with bm25s and serves ``POST /search`` with switchable incident modes (``BackgroundServer``
runs it on a thread for ``ragcanary demo``); ``python -m ragcanary.demo`` serves it alone.
"""
