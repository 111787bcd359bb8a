"""Replicas of `ragcanary serve` on one PostgreSQL database (the design: ``heartbeats``)."""
