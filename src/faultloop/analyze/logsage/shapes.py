"""What programs say, read by its shape where no row knows the wording: the fallback of RULES.

RULES holds the templates programs print, one row each. A program, launcher or wording with no
row still says what happened in a few shapes, modelled here once:

  * Python's exception line (`module.ClassError: message`, `ClassError(...)`, a class whose name
    says it is an exception) anywhere on a line;
  * a launcher's report of a child, from any program: a rank or process named with an exit status
    or a signal (`worker 3 exited with code 137`, `rank 2 was killed by signal 9`), or with what
    became of it (`crashed`, `killed`, `non-zero status`);
  * a failure statement at any log level (`... encountered an error: ...`, `... failed with ...`,
    `This is likely a configuration error`);
  * the templates of RULES' rows anchored at the start of the program's words, found anywhere on a
    line behind a prefix no shape reads (ANYWHERE): what stands before them is framing.

A shape is tried only on a line that reached Python (some row's anchor is in it: the prefilter is
unchanged) and that no row of RULES reads, so it never goes ahead of a known template
(logsage/reading.py). Lines that retry, fall back or skip state no failure (QUIET_RE).
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.launchers import LAUNCHER_EXCEPTIONS
from faultloop.analyze.logsage.rules import RULES
from faultloop.analyze.logsage.vocab import DEATH, EXCEPTION_KIND, REPORTED, Cause, Rule

ANY_PROGRAM = ("any program", "the shape of what programs print (logsage/shapes.py)")
CPYTHON_SHAPE = ("CPython", "Python/pythonrun.c: `module.Class: message` (print_exception), repr(): `Class(args)`")

# an exception class by its name's shape; a launcher's report of a child (its own rows read it) is not one
_CLASS = r"(?:[A-Z][A-Za-z0-9_]*(?:Error|Exception|Timeout|Interrupt|Exit|Failure|Fault)|Exception)"
_NOT_LAUNCHERS = "".join(f"(?!{name}\\b)" for name in LAUNCHER_EXCEPTIONS)
_MODULE = r"(?:[a-z_]\w*\.)"  # a dotted module path's part
_MESSAGE = r": (?!\s*[\d.eE+-]+\s*$)(?=\S)"  # an exception's message, never a metric's value (`MSE: 0.1`)
# where a template or an exception line may start: the line's start, or after a blank, a bracket, a
# quote, `=` or `,` (never inside a word, a dotted name or C++'s `c10::Error`)
BOUNDARY = r"(?<![^\s\[\](){}<>|'\"=,])"
# who a launcher reports on: a rank (global), a local rank or a process's index on its node, a pid
_PROCESS = r"(?:[Ll]ocal[_ ][Rr]ank|[Pp]rocess|[Pp]roc|[Ww]orker|[Tt]ask|[Cc]hild(?: process)?)"
_CHILD = (
    rf"(?:\b[Rr]ank[ #:=]*(?P<rank>\d{{1,6}})(?!\d)|\b{_PROCESS}[ #:=]*(?P<local>\d{{1,3}})(?![\d.])"
    r"|\b(?:[Pp]id|PID|[Pp]rocess|[Cc]hild(?: process)?)[ #:=]*\(?(?:[Pp]id[ :=]*)?(?P<pid>\d{4,9})(?!\d))"
    r"[^.;!?\n]{0,60}?"  # and the rest of the same clause
)
_ENDED = r"\b(?:exit(?:ed)?|returned|terminated|ended|finished|failed|died|stopped)(?: with)?(?: an?)?"
_SIGNALLED = r"\b(?:killed|terminated|died|exited|stopped|ended|aborted)(?: by| with| on| due to| from)?(?: the)?"
# fmt: off
SHAPES: tuple[Rule, ...] = (
    # a launcher's report of a child: a signal, an exit status, or what became of it
    Rule("child_signalled", DEATH, (),
         rf"{_CHILD}{_SIGNALLED}(?: signal[ :=]*|[ :=]*(?=SIG[A-Z]))(?P<sig>SIG[A-Z0-9]+|\d{{1,2}})\b",
         origin=ANY_PROGRAM),
    Rule("child_exit", DEATH, (),
         rf"{_CHILD}{_ENDED}(?: (?:exit|return|error|non-?zero))?[ _-]?(?:code|status)[ :=]*\(?(?P<code>-?\d{{1,3}})\b",
         origin=ANY_PROGRAM),
    Rule("child_killed", DEATH, (), rf"{_CHILD}\b(?P<how>killed|segfaulted|segmentation fault|core dumped|aborted)\b",
         origin=ANY_PROGRAM),
    Rule("child_crashed", DEATH, (), rf"{_CHILD}\b(?:crashed|non-?zero (?:exit )?status)\b", Cause.CRASH, ANY_PROGRAM),
    # Python's exception line anywhere on the line: `pkg.mod.ClassError: message`, `ClassError(...)`,
    # `pkg.mod.Class: message` (a dotted module path names an exception class of any name)
    Rule("exception_shape", EXCEPTION_KIND, (),
         rf"{BOUNDARY}{_MODULE}*{_NOT_LAUNCHERS}{_CLASS}(?:{_MESSAGE}|\((?=[^)]))"
         rf"|{BOUNDARY}{_MODULE}+{_NOT_LAUNCHERS}[A-Z][A-Za-z0-9_]*{_MESSAGE}", Cause.WORKLOAD_EXC, CPYTHON_SHAPE),
    # a failure statement, whatever the level it is logged at
    Rule("failure_statement", REPORTED, (),
         r"\b(?:encountered|hit|raised|threw|caught|reported) (?:an? |the )?(?:\w+ )?(?:error|exception|failure)s?\b"
         r"|\b(?:[Ff]ailed|FAILED|[Cc]rashed|[Aa]borted) (?:with|due to|because)\b"
         r"|\b[Ee]rror (?:occurred|occured|happened)\b"
         r"|\b(?:is|was) (?:likely |probably |most likely )?an? (?:\w+ )?error\b", Cause.PROGRAM_ERROR, ANY_PROGRAM),
)
# fmt: on
SHAPE_NAMES = frozenset(rule.name for rule in SHAPES)  # a verdict resting on one of them is the generic reading's
# the signal a launcher's word for a child's end names (`killed`: strsignal(SIGKILL), as srun and bash print it)
HOW_SIGNAL = {
    "killed": "SIGKILL",
    "segfaulted": "SIGSEGV",
    "segmentation fault": "SIGSEGV",
    "core dumped": "SIGABRT",
    "aborted": "SIGABRT",
}
# Python source a traceback shows (`    raise ValueError(...)`; rich's traceback panel numbers it behind
# its gutter, `│ ❱ 301 │   │   raise HTTPError(...)`, rich/traceback.py): code, not what happened
CODE_RE = re.compile(
    r"^\s*(?:│\s*(?:❱\s*)?\d+\s*│[\s│]*)?"
    r"(?:raise|except|return|if|elif|assert|with|def|class|import|from|yield|await|for|while)\b"
)
# a line that retries, falls back, skips or ignores: whatever failed, the program went on
QUIET_RE = re.compile(
    r"\b(?:[Rr]etry|[Rr]etrying|[Rr]etries|[Ww]ill retry|[Ff]alling back|[Ff]allback|[Ii]gnor(?:e|ed|ing)|"
    r"[Ss]kip(?:s|ped|ping)?|[Cc]ontinuing|[Rr]ecovered|[Rr]esuming)\b"
)
_COMPILED = tuple((rule, re.compile(rule.pattern)) for rule in SHAPES)


def _anywhere(rule: Rule) -> re.Pattern[str] | None:
    """A row anchored at the start of the program's words, found anywhere on a line behind a prefix
    (at a BOUNDARY)."""
    if not rule.pattern.startswith("^"):
        return None
    return re.compile(BOUNDARY + "(?:" + rule.pattern[1:] + ")")


# (table position, row, its anywhere form) of RULES' rows anchored at the line's start
ANYWHERE: tuple[tuple[int, Rule, re.Pattern[str]], ...] = tuple(
    (i, rule, rx) for i, rule in enumerate(RULES) if (rx := _anywhere(rule)) is not None
)


def read_shape(text: str) -> tuple[Rule, re.Match[str]] | None:
    """The first shape the program's words show (SHAPES, in order), where they are no code and
    retry nothing."""
    if QUIET_RE.search(text) or CODE_RE.match(text):
        return None
    for rule, rx in _COMPILED:
        if m := rx.search(text):
            return rule, m
    return None
