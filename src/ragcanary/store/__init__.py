"""Where runs are kept: storage (SQLite, PostgreSQL), its schema, the run keeper, the outage buffer.

Used by ``serve``, ``cli`` and ``reports``; imports only ``measure`` records and the top level.
"""
