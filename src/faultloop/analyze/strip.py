"""The analyzers' copy of a cell's main log: every ground-truth line removed (the injection markers,
the experiment folder names that spell out the fault), the first step of rule logsage."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from faultloop.contracts import Manifest
from faultloop.core import atomic
from faultloop.core.cell import cell_name_pattern
from faultloop.marker import strip_markers


def strip_log(manifest_path: Path, output: Path) -> int:
    """Write the analyzers' copy of a cell's main log with every ground-truth line removed."""
    main_log = Manifest.read(manifest_path).main_log
    source = manifest_path.parent / main_log if main_log else None
    lines: list[str] = []
    if source is None or not source.is_file():
        print(f"no main log for this run ({source}); the analyzers get an empty log", file=sys.stderr)
    else:
        cell_dir_re = re.compile(cell_name_pattern())
        with open(source, errors="replace") as handle:
            # Experiment folder names (n2_SIGKILL_r1_i5) spell out the truth: a workload that
            # prints its paths (Megatron prints its arguments) must not give the answer away.
            lines = [cell_dir_re.sub("experiment", line) for line in strip_markers(handle)]
    atomic.write_atomic(output, "".join(lines))
    print(f"{source}: kept {len(lines)} lines", file=sys.stderr)
    return len(lines)
