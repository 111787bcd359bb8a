"""The configuration: its model, ``${VAR}`` expansion, YAML/JSON with line maps, located problems.

Imports only ``measure`` and the top level (errors, redaction).
"""
