"""The configuration: its model, ``${VAR}`` expansion, YAML/JSON with line maps, located problems.

Imports only the top level (errors, redaction).
"""
