"""The pure core: IR metrics, statistics, ranked-list comparison, drift, scoring, the verdict.

The ground floor: imports nothing of ragcanary but itself and ``errors``, and no I/O library
at all, not even through another module. Everything here is a function over plain records
(cases and suites in ``cases``, runs in ``results``) and plain ``Settings``, never config
objects, testable without a network, a database, a file or a clock.
"""
