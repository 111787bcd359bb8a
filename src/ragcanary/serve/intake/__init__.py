"""Failure reports from the application: who sent them, what they may hold, redacted and queued."""
