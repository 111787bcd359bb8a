"""Stale labels: relevant ids no recent run of a pair returned, or its index no longer holds."""
