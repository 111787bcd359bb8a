"""What a run reads like: report JSON, diffs and on-call views, terminal tables, Markdown, JUnit.

Imports ``store``, ``probe``, ``measure``, ``suites``, ``config`` and the top level.
"""
