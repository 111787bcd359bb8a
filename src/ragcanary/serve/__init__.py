"""The daemon: its life (``daemon.py``) in rooms, each with one role; see docs/architecture.md.

``schedule/`` runs the jobs, ``replicas/`` shares them on PostgreSQL, ``stale/`` finds stale
labels, ``metrics/`` exports them, ``intake/`` takes failure reports in, ``http/`` answers
the API and the pages through the ``service.Service`` protocol.

Imports ``reports``, ``store``, ``probe``, ``measure``, ``suites``, ``config`` and the top level.
"""
