"""logsage: attribute a failed distributed job from its log (which rank, what fault, restart?).

Deterministic and offline by default. The package, by concern:
  rules.py      RULES (what log lines mean) and the small tables: THE FILE TO PATCH for a missed or
                misread line
  policy.py     POLICY, the cause table: the file to patch for a wrong decision on a whole cause
  vocab.py      the vocabulary both are written in: evidence kinds, Cause, the Rule row (below
                rules.py and launchers/, which use it)
  launchers/    the launcher layer: one adapter per launcher or orchestrator (torchrun, spawn, DeepSpeed,
                accelerate, Lightning, srun, mpirun, Ray, Dask, Horovod...), its rows spliced into RULES
  messages.py   the message catalog (catalog/*.tsv): the templates RULES are written against
  sources.py    the catalog's coverage: a program's templates read from its sources, against the rows
  prefilter.py  finds the lines worth a look (ripgrep, GNU grep or Python)
  framing.py    the grammar of line prefixes, and of the prefixes it does not list, by their shape
  reading.py    reads one line: the grammar and RULES first, then by shape
  shapes.py     what programs say, by its shape where no row knows the wording (the fallback of RULES)
  scan.py       reads each prefiltered line and classifies it into bounded facts
  ranks.py      who is who: the census of ranks and world size, and how prefixes map to global ranks
  records.py    multi-line records: tracebacks (whole, cut off, a launcher's), stack dumps,
                torchrun's summary records (their failure times), launchers' multi-line reports
  attribute.py  the decisions, from the facts to a cause and the ranks at fault (DECISIONS: their
                order), made of: timeline.py (symptom vs origin per rank, in time), causes.py (the
                cause a rank's evidence names), culprits.py (which rank the evidence singles out),
                confidence.py (the finding and how sure it is)
  engine.py     analyze_log and the Verdict (the logsage.json contract)
  modes.py      LLM and upstream modes (the command line is faultloop.cli.logsage)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ hands out, for the type checker (and the import graph's readers)
    from faultloop.analyze.logsage.engine import Settings, Verdict, analyze_log, analyzer_fingerprint
    from faultloop.analyze.logsage.facts import Evidence
    from faultloop.analyze.logsage.modes import analyze_with_llm, run_upstream
    from faultloop.analyze.logsage.policy import POLICY
    from faultloop.analyze.logsage.rules import RULES
    from faultloop.analyze.logsage.vocab import Cause, Rule

# name -> the module that defines it. Imported on first use, not with the package: `faultloop
# logsage` imports the prefilter and its rules alone, starts ripgrep, and imports the analyzer
# while ripgrep reads (the analyzer's imports are a third of a 0.5 GB log's time).
_HOMES = {
    "POLICY": "policy",
    "RULES": "rules",
    "Cause": "vocab",
    "Evidence": "facts",
    "Rule": "vocab",
    "Settings": "engine",
    "Verdict": "engine",
    "analyze_log": "engine",
    "analyze_with_llm": "modes",
    "analyzer_fingerprint": "engine",
    "run_upstream": "modes",
}
__all__ = [
    "POLICY",
    "RULES",
    "Cause",
    "Evidence",
    "Rule",
    "Settings",
    "Verdict",
    "analyze_log",
    "analyze_with_llm",
    "analyzer_fingerprint",
    "run_upstream",
]


def __getattr__(name: str) -> Any:
    """A name of __all__, from its module (imported now); anything else is a submodule or absent."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
