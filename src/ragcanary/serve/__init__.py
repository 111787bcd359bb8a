"""The daemon: its life and schedule, the HTTP API, the Prometheus exporter and its cache.

Imports ``reports``, ``store``, ``probe``, ``measure``, ``suites``, ``config`` and the top level.
"""
