"""The errors every layer may raise about what a user gave it."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem, naming the file or key."""
