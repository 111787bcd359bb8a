"""Talking to retrievers: the target adapter, the runner with its concurrency and rate gate.

Also one cycle of a suite against a target, and drafting a suite from live results.
Imports ``suites``, ``config``, ``measure`` and the top level.
"""
