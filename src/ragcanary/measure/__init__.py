"""The pure core: IR metrics, statistics, ranked-list comparison, drift, scoring, the verdict.

Imports only ``suites`` (its case records) and the top level, and no I/O library at all:
everything here is a function over plain records and plain ``Settings``, never config
objects, testable without a network, a database or a clock.
"""
