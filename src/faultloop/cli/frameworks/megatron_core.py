"""`python -m faultloop.cli.frameworks.megatron_core`: one rank of the megatron_core workload."""

from __future__ import annotations

import sys

from faultloop.cli.frameworks import rank_main


def main(argv: list[str] | None = None) -> int:
    from faultloop.run.frameworks import megatron_core

    return rank_main(megatron_core.NAME, argv, megatron_core.train)


if __name__ == "__main__":
    sys.exit(main())
