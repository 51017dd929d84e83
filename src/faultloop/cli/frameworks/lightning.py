"""`python -m faultloop.cli.frameworks.lightning`: one rank of the lightning workload (under
Lightning's own launcher, one node: Lightning starts the node's other ranks)."""

from __future__ import annotations

import sys

from faultloop.cli.frameworks import rank_main


def main(argv: list[str] | None = None) -> int:
    from faultloop.run.frameworks import lightning

    return rank_main(lightning.NAME, argv, lightning.train)


if __name__ == "__main__":
    sys.exit(main())
