"""`python -m faultloop.cli.workload`: one rank of the built-in workload, as its launcher starts it.

The rank's options are the JobSettings the rank takes (faultloop.run.spec.RANK_SETTINGS); its
identity and the fault come from the environment (faultloop.run.workload).
"""

from __future__ import annotations

import argparse
import sys

from faultloop.cli.options import add_settings, settings_from
from faultloop.run import workload
from faultloop.run.spec import RANK_SETTINGS, JobSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="faultloop.cli.workload", description=__doc__.splitlines()[0])
    add_settings(parser, JobSettings, only=RANK_SETTINGS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return workload.run_rank(settings_from(args, JobSettings, only=RANK_SETTINGS))


if __name__ == "__main__":
    sys.exit(main())
