"""`python -m faultloop.cli.frameworks.ray_train`: the ray_train workload's driver (once per job:
it starts a local Ray cluster, and Ray Train starts the ranks)."""

from __future__ import annotations

import sys

from faultloop.cli.frameworks import rank_main


def main(argv: list[str] | None = None) -> int:
    from faultloop.run.frameworks import ray_train

    return rank_main(ray_train.NAME, argv, ray_train.train)


if __name__ == "__main__":
    sys.exit(main())
