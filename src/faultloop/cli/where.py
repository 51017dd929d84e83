"""`faultloop where [key=value ...]`: the session folder and report path of a configuration."""

from __future__ import annotations

import sys

from faultloop.plan import config, layout


def main(argv: list[str]) -> int:
    try:
        resolved = config.load(config.parse_overrides(argv))
    except config.ConfigError as exc:
        print(f"faultloop where: {exc}", file=sys.stderr)
        return 2
    session = layout.session_dir(resolved)
    print(f"session: {session.resolve()}")
    print(f"report: {(session / layout.REPORT_MD).resolve()}")
    return 0
