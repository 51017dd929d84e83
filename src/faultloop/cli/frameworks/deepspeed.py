"""`python -m faultloop.cli.frameworks.deepspeed`: one rank of the deepspeed workload."""

from __future__ import annotations

import sys

from faultloop.cli.frameworks import rank_main


def main(argv: list[str] | None = None) -> int:
    from faultloop.run.frameworks import deepspeed

    return rank_main(deepspeed.NAME, argv, deepspeed.train)


if __name__ == "__main__":
    sys.exit(main())
