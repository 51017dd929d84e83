"""`faultloop check-session [key=value ...]`: whether a session ran as its pool says.

The configuration is given as `snakemake --config` takes it (the same pool and session), so the
command that ran a session checks it: every cell's job ran, its fault fired on its rank at its
iteration on its node, under the pool's workload and launcher, and its log holds the
framework's and the launcher's own lines (faultloop.run.session_check). Exit status 1 when a cell
fails or has not run.
"""

from __future__ import annotations

import argparse
import sys

from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.plan import config
from faultloop.plan.pool import PoolError
from faultloop.run.matrix import refuser
from faultloop.run.session_check import check_session, render


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop check-session", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="configuration as `--config` takes it, e.g. pool_file=config/pools/frameworks.tsv session=fw",
    )
    args = parser.parse_args(argv)
    try:
        resolved = config.load(config.parse_overrides(args.overrides))
        workload, launcher = config.session_workload(resolved), resolved["run_job"]["launcher"]
        cells = config.pool_cells(resolved, refuser(workload, launcher))
    except (ConfigError, PoolError) as error:
        print(f"faultloop check-session: {error}", file=sys.stderr)
        return 2
    result = check_session(layout.session_dir(resolved), cells, workload, launcher)
    print(render(result))
    return 0 if result.passed else 1
