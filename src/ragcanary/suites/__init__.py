"""Canary suites: the case model, loading suite files, and importers of standard collections.

Imports only ``config`` and the top level.
"""
