"""The generic reading: a failure statement by its severity and its words, where no row knows the
program that printed it.

An operator who has never met a program still reads its log: a line logged at an error or fatal
severity, in whatever framing the program's logger prints it, that says `failed`, `refused`,
`died` or `corrupt` states a failure. Its category comes from the words it carries (CATEGORIES:
memory, signal, device, network, storage, permission, configuration, a hang), else it is a
program's error. Known templates (rules.RULES, shapes.SHAPES) always read first; this reading is
only the fallback of a log on which they found nothing (engine.py), so its confidence is low and
its reason says that no row knows the wording.

The tables below are what loggers print and what failing programs say, not any one log's words:
SEVERITIES from the logging frameworks' formats (CPython's logging `%(levelname)s`, glog's
`[IWEF]mmdd`, torch's c10 `[E ...]`, syslog-like `<error>`, logfmt's `level=error`, JSON's
`"level": "error"`), FAILURE_WORDS from the verbs and adjectives of errno's strerror texts and of
the exception messages the frameworks raise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.analyze.logsage import exits
from faultloop.analyze.logsage.shapes import CODE_RE, QUIET_RE
from faultloop.analyze.logsage.vocab import Cause

ERROR, FATAL = "error", "fatal"
ENDED = "ended"  # a Statement's severity where it reports an exit status or a signal (exits.py), any level

# severity -> the framings loggers print it in (matched on the raw line: framing peels the header)
# fmt: off
SEVERITIES: tuple[tuple[str, str], ...] = (
    (FATAL, r"\b(?:FATAL|CRITICAL|CRIT|PANIC|EMERG|ALERT|SEVERE)\b"        # logging's and syslog's names
            r"|(?:^|[\s\]|:>)])F\d{4} \d\d:\d\d:\d\d"                        # glog: F0715 12:00:00.123
            r"|\[F(?: |\d{3,4} )"                                          # torch c10: [F socket.cpp:...]
            r"|[<\[](?:fatal|critical|crit|panic)[>\]]"                    # <fatal>, [critical]
            r"|\blevel[\"']?\s*[=:]\s*[\"']?(?:fatal|critical|crit|panic)\b"),  # logfmt, JSON
    (ERROR, r"\b(?:ERROR|ERR|FAILURE)\b"
            r"|(?:^|[\s\]|:>)])E\d{4} \d\d:\d\d:\d\d"                        # glog: E0715 12:00:00.123
            r"|\[E(?: |\d{3,4} )"                                          # torch c10: [E ProcessGroupNCCL.cpp:...]
            r"|[<\[](?:error|err)[>\]]"                                    # <error>, [error]
            r"|\blevel[\"']?\s*[=:]\s*[\"']?(?:error|err)\b"),             # logfmt, JSON
)
# a warning in the same framings: no failure statement, but a rank that alone warns stands out (spatial.py)
WARNING = (
    r"\b(?:WARN|WARNING)\b|(?:^|[\s\]|:>)])W\d{4} \d\d:\d\d:\d\d|\[W(?: |\d{3,4} )|[<\[](?:warn|warning)[>\]]"
    r"|\blevel[\"']?\s*[=:]\s*[\"']?(?:warn|warning)\b"
)
# the words that say something failed (strerror's texts, the frameworks' messages), lower-case: a
# line at an error severity without one of them reports, but states no failure (`ERROR: see above`);
# each is read with its first letter in either case, or all in capitals but for the severities' own
# names (`ERROR`, `FATAL`, `PANIC` in capitals are the framing's)
FAILURE_WORDS: tuple[str, ...] = (
    "fail", "fails", "failed", "failure", "failing", "refused", "unreachable", "lost", "timed out", "timeout",
    "time out", "abort", "aborts", "aborted", "aborting", "killed", "evicted", "died", "dead", "denied",
    "disconnected", "invalid", "corrupt", "corrupted", "corruption", "exhausted", "crash", "crashed", "crashes",
    "exceeded", "unexpected", "unexpectedly", "unable", "cannot", "can't", "could not", "not found", "no such",
    "missing", "broken", "reset", "segmentation", "exception", "error", "fatal", "panic", "hung", "stalled",
    "stuck", "deadlock", "mismatch", "mismatched", "unsupported", "illegal", "out of",
)
# category -> the cause it reads as, and the words that carry it; the first row whose words the
# statement carries decides (memory before device: `CUDA out of memory` is memory; storage before
# network: `volume unreachable: I/O error` is storage)
CATEGORIES: tuple[tuple[str, str, str], ...] = (
    ("memory", Cause.OOM,
     r"(?i)\bout of memory\b|\bOOM(?:[- ]?kill(?:ed|er)?)?\b|OOMKilled|cannot allocate memory|\bENOMEM\b|"
     r"bad_alloc|memory (?:exhausted|limit)|\bmemory\b.{0,30}\bexceeded\b"),
    ("signal", Cause.CRASH,  # the signal's own cause where the words name one (exits.SIGNAL_CAUSES)
     r"(?i)segmentation fault|\bsegfault|core dumped|\bSIG[A-Z]{2,6}\b|\bsignal\b|bus error|"
     r"illegal instruction|floating point exception|\bkilled\b"),
    ("device", Cause.GPU_ERROR,
     r"\bCUDA\b|\bGPU\b|\bcuDNN\b|\bcuBLAS\b|\bNVML\b|\bXid\b|\bECC\b|device-side|\bROCm\b|\bHIP\b|"
     r"(?i:uncorrectable)"),
    ("storage", Cause.STORAGE_ERROR,
     r"(?i)no space left|\bdisk\b|\bquota\b|\bI/O error|\bEIO\b|read-only file ?system|file ?system|"
     r"\bENOSPC\b|\bNFS\b|\bLustre\b|\bmount"),
    ("hang", Cause.HANG,
     r"(?i)\bhung\b|\bhang(?:s|ing)?\b|\bstall(?:ed|s)?\b|\bstuck\b|\bdeadlock|no progress|"
     r"watchdog|heartbeat"),
    ("network", Cause.NETWORK,
     r"(?i)connection|connect\b|refused|unreachable|\bsocket|\bnetwork|\bpeer\b|\bhost\b|\bport\b|"
     r"rendezvous|\bIB\b|infiniband|\bibv_|\bRDMA\b|\btransport\b|disconnected|\bDNS\b|resolve|"
     r"\bECONN|\bETIMEDOUT|\bEHOSTUNREACH|timed? ?out"),
    ("permission", Cause.CONFIG_ERROR,
     r"(?i)permission denied|not permitted|\bEACCES\b|\bEPERM\b|unauthori[sz]ed|forbidden|access denied|"
     r"credential"),
    ("configuration", Cause.CONFIG_ERROR,
     r"(?i)\bconfig(?:uration)?\b|\binvalid\b|\bsetting\b|\boption\b|\bargument\b|\bparameter\b|"
     r"environment variable|\bnot set\b|\bunsupported\b|\bmismatch|\bversion\b|\bexceeded\b"),
)
# fmt: on
STAMPED_MIN = 3  # lines without a failure word that show whether a severity is stamped on every line
PROGRAM = "program"  # a statement whose words name no category: the program's own error
_SEVERITY_RES = tuple((level, re.compile(rx)) for level, rx in SEVERITIES)


def _either_case(words: tuple[str, ...]) -> str:
    """The words as one regex: each with its first letter in either case, or all in capitals (but
    the severities' names)."""
    capitals = [re.escape(w.upper()) for w in words if w not in ("error", "fatal", "panic")]
    forms = [f"[{w[0]}{w[0].upper()}]{re.escape(w[1:])}" for w in words] + capitals
    return r"\b(?:" + "|".join(sorted(forms, key=len, reverse=True)) + r")\b"


_FAILURE_RE = re.compile(_either_case(FAILURE_WORDS))
_WARNING_RE = re.compile(WARNING)
_CATEGORY_RES = tuple((name, cause, re.compile(rx)) for name, cause, rx in CATEGORIES)
# what one of SEVERITIES' framings holds, lower-cased (glog's and torch's letters apart): a line without
# any is not read further (a tail's every line is tried: substring tests, not a case-blind regex)
_SEVERITY_KEYS = ("fatal", "crit", "panic", "emerg", "alert", "severe", "err", "failure")
_LETTER_RE = re.compile(r"[EF]\d{4} |\[[EF][ \d]")


@dataclass(frozen=True, slots=True)
class Statement:
    """A failure statement the generic reading found: its severity (ENDED: an exit status or a
    signal at any level), the words that say it failed, its category (a CATEGORIES name, or
    PROGRAM), the cause that category reads as and the signal it names."""

    severity: str
    failed: str
    category: str
    cause: str
    signal: str | None = None


def severity(raw: str) -> str | None:
    """The error severity the line's framing states (FATAL before ERROR), None for any other."""
    low = raw.lower()
    if not any(key in low for key in _SEVERITY_KEYS) and not _LETTER_RE.search(raw):
        return None
    return next((level for level, rx in _SEVERITY_RES if rx.search(raw)), None)


def warns(raw: str) -> bool:
    """Whether the line's framing states a warning or worse."""
    return _WARNING_RE.search(raw) is not None or severity(raw) is not None


def category(words: str) -> tuple[str, str]:
    """(category, cause) of the words of a failure: the first CATEGORIES row they carry, else the
    program's own error."""
    return next(
        ((name, cause) for name, cause, rx in _CATEGORY_RES if rx.search(words)), (PROGRAM, Cause.PROGRAM_ERROR)
    )


def stamped(lines: list[tuple[str, str]]) -> bool:
    """Whether an error severity is stamped on the lines rather than meant: at least half of the
    (raw, words) lines without a failure word carry one too (a collector that files all of stderr
    at ERROR), STAMPED_MIN of them at least. (The lines without a severity are read for failure
    words only where that many with one are plain: a clean log pays for its severities only.)"""
    severe = [severity(raw) is not None for raw, _ in lines]
    plain_severe = sum(
        1 for (_, words), sev in zip(lines, severe, strict=True) if sev and not _FAILURE_RE.search(words)
    )
    if plain_severe < STAMPED_MIN:
        return False
    plain = plain_severe + sum(
        1 for (_, words), sev in zip(lines, severe, strict=True) if not sev and not _FAILURE_RE.search(words)
    )
    return 2 * plain_severe >= plain


def statement(raw: str, words: str, by_severity: bool = True) -> Statement | None:
    """The failure a line states, None where it states none (code a traceback shows, a line that
    retries or goes on): an exit status or a signal in any wording (exits.ended), else an error
    severity (read on the raw line, `raw`: framing peels the header) with a failure word (read on
    the program's words, `words`); not by severity where it is stamped on every line (`by_severity`
    false: see stamped)."""
    level = severity(raw) if by_severity else None
    if level is None and not exits.may_end(words):
        return None
    if not words.strip() or CODE_RE.match(words) or QUIET_RE.search(words):
        return None
    if (end := exits.ended(words)) is not None:
        return Statement(ENDED, end.said, "signal" if end.signal else "exit status", end.cause, end.signal)
    if level is None:
        return None
    failed = _FAILURE_RE.search(words)
    if failed is None:
        return None
    name, cause = category(words)
    if name == "signal" and (named := exits.named_signal(words)) is not None:
        return Statement(level, failed.group(), name, exits.cause_of(named, None, words), named)
    return Statement(level, failed.group(), name, cause)
