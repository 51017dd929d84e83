"""`python -m faultloop.cli.frameworks.<name>`: one rank of a framework workload, as its launcher
starts it (faultloop.frameworks names the module of each). The options are the rank's JobSettings,
as for the built-in workload (faultloop.cli.workload)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from faultloop.cli.options import add_settings, settings_from
from faultloop.run.spec import RANK_SETTINGS, JobSettings


def rank_main(name: str, argv: list[str] | None, train: Callable[[JobSettings], None]) -> int:
    """Parse the rank's options and run it; an exception propagates (Python prints it, exit 1).
    The rank's exit record is written as it leaves (run/frameworks/rank.exit_recorded)."""
    from faultloop.run.frameworks.rank import exit_recorded

    parser = argparse.ArgumentParser(
        prog=f"faultloop.cli.frameworks.{name}", description=f"one rank of the {name} workload"
    )
    add_settings(parser, JobSettings, only=RANK_SETTINGS)
    settings = settings_from(parser.parse_args(argv), JobSettings, only=RANK_SETTINGS)
    with exit_recorded():
        train(settings)
    return 0
