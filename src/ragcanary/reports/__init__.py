"""What a run reads like: report JSON, diffs and on-call views, terminal tables, Markdown, JUnit.

Imports ``store``, ``probe``, ``suites``, ``config``, ``measure`` and the top level.
"""
