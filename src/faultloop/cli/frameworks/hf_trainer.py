"""`python -m faultloop.cli.frameworks.hf_trainer`: one rank of the hf_trainer workload."""

from __future__ import annotations

import sys

from faultloop.cli.frameworks import rank_main


def main(argv: list[str] | None = None) -> int:
    from faultloop.run.frameworks import hf_trainer

    return rank_main(hf_trainer.NAME, argv, hf_trainer.train)


if __name__ == "__main__":
    sys.exit(main())
