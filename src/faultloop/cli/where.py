"""`faultloop where [key=value ...]`: the session folder and report path of a configuration."""

from __future__ import annotations

import sys

from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.plan import config


def main(argv: list[str]) -> int:
    try:
        resolved = config.load(config.parse_overrides(argv))
    except ConfigError as exc:
        print(f"faultloop where: {exc}", file=sys.stderr)
        return 2
    session = layout.session_dir(resolved)
    print(f"session: {session.resolve()}")
    print(f"report: {(session / layout.REPORT_MD).resolve()}")
    return 0
