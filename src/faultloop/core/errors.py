"""The errors every layer may raise about what a user gave it."""

from __future__ import annotations

import errno

FULL = (errno.ENOSPC, errno.EDQUOT)  # no space left, or over the user's quota


class ConfigError(ValueError):
    """A configuration problem, naming the file or key."""


def no_space(error: OSError, who: str) -> str | None:
    """One line for a full disk, which is the operator's to fix and no bug to trace; None for any
    other error. Names the file where the error knows it (faultloop.core.atomic's writes do)."""
    if error.errno not in FULL:
        return None
    where = f" writing {error.filename}" if error.filename else ""
    return f"{who}: {error.strerror}{where}; free space and run the same command again"
