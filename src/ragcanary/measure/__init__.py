"""The pure core: IR metrics, statistics, ranked-list comparison, drift, scoring, the verdict.

Imports only ``suites``, ``config`` and the top level, and no I/O library at all: everything
here is a function over plain records, testable without a network, a database or a clock.
"""
