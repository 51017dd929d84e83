"""Leaving programs out: logsage's tables without the rows, launcher adapters and catalog entries of
the programs named, to measure how it reads the log of a program it has never met (issue 39).

A program is named by the origin its table entries carry (vocab.Origin: the program and the file
that prints the template), one name each, lower case (`open-mpi`, `nccl`); torch is three, by the
file that prints: its elastic agent (`torch-elastic`: torchrun, the agent, its rendezvous), `c10d`
(the process groups, the store) and the rest (`torch`). An entry that several programs print (its
origin names them, comma-separated) is left out only with all of them: the others still print it.

The tables are filtered once, where they are built (rules.RULES, launchers.ADAPTERS,
messages.load_catalog), by the names in the environment variable FAULTLOOP_LOGSAGE_ABLATE
(comma-separated), so that every table derived from them (the prefilter's anchors, the compiled
rows, the shape fallback's rows, the launchers' frames and exception classes) follows without a
patch; `faultloop eval-logs --ablate PROGRAM` sets it for the process that grades. The grammar of
line prefixes (framing.py) and the small regex tables (progress, setup) are not filtered: they are
no program's words.
"""

from __future__ import annotations

import os
import re

from faultloop.analyze.logsage.vocab import Origin

ENV = "FAULTLOOP_LOGSAGE_ABLATE"
# the programs left out in this process (none unless the environment names some)
LEFT_OUT: frozenset[str] = frozenset(name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip())

# torch's programs by the file that prints (a source path's start); the rest of torch is `torch`
TORCH_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch-elastic", ("torch/distributed/elastic/", "torch/distributed/run.py", "torch/distributed/launcher/")),
    (
        "c10d",
        (
            "torch/csrc/distributed/c10d/",
            "torch/lib/c10d/",
            "torch/distributed/distributed_c10d.py",
            "torch/distributed/rendezvous.py",
        ),
    ),
)
# an origin's program whose name is not its lower-case words
NAMES = {"CUDA runtime": "cuda"}


def programs_of(origin: Origin) -> tuple[str, ...]:
    """The names of the programs that print an entry of this origin."""
    program, source = origin
    names = []
    for part in (p.strip() for p in program.split(",")):
        if part == "torch":
            names.append(next((name for name, starts in TORCH_PARTS if source.startswith(starts)), "torch"))
        else:
            names.append(NAMES.get(part) or re.sub(r"[^a-z0-9.+]+", "-", part.lower()).strip("-"))
    return tuple(names)


def keeps(origin: Origin, left_out: frozenset[str] = LEFT_OUT) -> bool:
    """Whether an entry of this origin stays: some program that prints it is not left out."""
    return not left_out or not set(programs_of(origin)) <= left_out
