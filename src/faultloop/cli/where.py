"""`faultloop where [key=value ...]`: the session folder and report path of a configuration."""

from __future__ import annotations

import argparse
import sys

from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.plan import config


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop where", description=__doc__)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="configuration as `--config` takes it")
    args = parser.parse_args(argv)
    try:
        resolved = config.load(config.parse_overrides(args.overrides))
    except ConfigError as exc:
        print(f"faultloop where: {exc}", file=sys.stderr)
        return 2
    session = layout.session_dir(resolved)
    print(f"session: {session.resolve()}")
    print(f"report: {(session / layout.REPORT_MD).resolve()}")
    return 0
