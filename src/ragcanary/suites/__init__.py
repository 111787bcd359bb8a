"""Canary suites: suite files read into measure's plain cases, importers of standard collections.

Also the config loaded with its suites, and a suite's config as the settings measure takes.
Imports only ``config``, ``measure`` and the top level.
"""
