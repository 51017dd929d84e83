"""Scoring: each verdict graded against the injected truth, the session tables, the real-log corpus."""
