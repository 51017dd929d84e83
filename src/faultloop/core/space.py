"""Whether a folder's filesystem is (nearly) full: a run on it stops with one line instead of
launching jobs that cannot write, or retrying them."""

from __future__ import annotations

import os
from pathlib import Path

# A filesystem with less free than this (the smaller of the two), or no inode free, is full.
FULL_BYTES = 64 << 20
FULL_FRACTION = 0.05


def full(folder: Path) -> str | None:
    """What is left on the filesystem holding folder (or the nearest folder above it that exists)
    when it is full, e.g. "12 KiB free of 24576 KiB, 3 inodes free"; None while it is not."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stat = os.statvfs(probe)
    free, size = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    if free >= min(FULL_BYTES, size * FULL_FRACTION) and (stat.f_favail or not stat.f_files):
        return None
    return f"{free >> 10} KiB free of {size >> 10} KiB, {stat.f_favail} inodes free"
