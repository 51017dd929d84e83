"""Exit statuses and signals in any wording, and the cause a signal reads as where the log says
who sent it.

Launchers, shells, orchestrators and the processes themselves report an end in a handful of
shapes: a status (`exit code 137`, `exitcode: -9`, `EXIT CODE: 139`, `exited with status 1`,
`returned non-zero exit status 1`, `rc=134`), a signal (`signal 9`, `received signal SIGTERM`,
`terminated by signal 11`, `killed by SIGKILL`), or glibc's words for one (bash's `Killed`,
`Segmentation fault (core dumped)`, Kubernetes' `OOMKilled`). A status of 128 + N is signal N
(the shells'), a negative one is the signal (Popen's and torch's). What the signal means depends
on who sent it: SIGKILL from the kernel's OOM killer is memory, SIGTERM from the scheduler is an
external stop, SIGSEGV is the process's own crash (SIGNAL_CAUSES, senders' words in SENDERS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.analyze.logsage.shapes import CODE_RE
from faultloop.analyze.logsage.vocab import Cause
from faultloop.signals import SRUN_WORDS, exit_signal, signal_name

# signal -> the cause a death by it reads as when the log does not say who sent it: the process's
# own fault (SEGV, BUS, ILL, FPE, TRAP, SYS: its code; ABRT: it aborted; PIPE: its reader went
# away first), a stop from outside (TERM, INT, HUP, QUIT, USR1/2, ALRM, XCPU, XFSZ: a scheduler's,
# an operator's or a resource limit's), or SIGKILL, which nothing catches and nothing prints for
SIGNAL_CAUSES: dict[str, str] = {
    "SIGSEGV": Cause.SEGFAULT,
    "SIGBUS": Cause.SEGFAULT,
    "SIGILL": Cause.SEGFAULT,
    "SIGFPE": Cause.SEGFAULT,
    "SIGTRAP": Cause.SEGFAULT,
    "SIGSYS": Cause.SEGFAULT,
    "SIGABRT": Cause.OS_ABORT,
    "SIGPIPE": Cause.CRASH,
    "SIGKILL": Cause.SIGKILL,
    "SIGTERM": Cause.SIGTERM,
    "SIGINT": Cause.SIGINT,
    "SIGHUP": Cause.SIGTERM,
    "SIGQUIT": Cause.EXTERNAL_SIGNAL,
    "SIGUSR1": Cause.EXTERNAL_SIGNAL,
    "SIGUSR2": Cause.EXTERNAL_SIGNAL,
    "SIGALRM": Cause.EXTERNAL_SIGNAL,
    "SIGXCPU": Cause.EXTERNAL_SIGNAL,
    "SIGXFSZ": Cause.STORAGE_FULL,
    "SIGSTOP": Cause.SIGSTOP,
}
# who sent a signal, by the words the line says it with -> the cause, whatever the signal
SENDERS: tuple[tuple[str, str], ...] = (
    (r"(?i)\bOOM\b|oom[-_ ]?kill|OOMKilled|out of memory|memory (?:limit|cgroup)", Cause.OOM),
    (r"(?i)\bpreempt", Cause.PREEMPTION),
    (r"(?i)\bscheduler\b|\bslurm|\bcancel", Cause.EXTERNAL_SIGNAL),
)
_SIG = r"(?P<sig>SIG[A-Z][A-Z0-9]{1,6}|\d{1,2})\b"
_WORDS = "|".join(re.escape(w) for w in SRUN_WORDS if w != "Quit")  # `Quit` alone is too plain a word
_ENDED = r"(?:terminated|killed|stopped|died|ended|exited|aborted|interrupted)"
_STATUS = r"(?:exit |return |error )?(?:code|status)"
# fmt: off
WORDINGS: tuple[str, ...] = (
    # exit code N, exitcode: -N, EXIT CODE: N, exit status N
    r"(?i)\bexit(?:ed)?[ _]?(?:code|status)\b[\s:=]*\(?(?P<code>-?\d{1,3})\b",
    rf"(?i)\b(?:exited|terminated|finished|ended|failed) with {_STATUS}[\s:=]*(?P<code>-?\d{{1,3}})\b",
    r"(?i)\breturned (?:non-?zero )?(?:exit )?(?:status|code)[\s:=]*(?P<code>-?\d{1,3})\b",
    r"(?i)\b(?:return[ _]?code|returncode|rc)\s*[:=]\s*(?P<code>-?\d{1,3})\b",
    rf"(?i)\b{_ENDED} (?:by|with|on|due to|from) (?:the )?(?:signal[\s:#=]*)?{_SIG}",
    rf"(?i)\b(?:received|receiving|caught|got|recv'?d) (?:a |the )?(?:signal[\s:#=]*)?{_SIG}",
    rf"(?i)\bsignal[\s:#=]+{_SIG}(?: \(SIG[A-Z]+\))? (?:received|caught|delivered)",
    r"(?P<oom>\bOOMKilled\b|\bOOM[- ]?killed\b|\boom[-_]kill(?:ed|er)?\b)",
    # bash's report of a job that died by a signal (`[1]+  Killed   python train.py`, `/bin/bash: line 1:
    # 123 Segmentation fault      python train.py`), or the signal's words alone on a line
    rf"^\s*(?:\[\d+\][+-]?\s+|[+-]\s+|\S*sh: line \d+: +\d+ )?(?P<words>{_WORDS})"
    r"(?:\s+\(core dumped\))?(?:\s*$|\s{2,}\S)",
    rf"(?P<words2>{_WORDS}|Quit) \(core dumped\)",
)
# fmt: on
_COMPILED = tuple(re.compile(rx) for rx in WORDINGS)
_SENDER_RES = tuple((re.compile(rx), cause) for rx, cause in SENDERS)
# the line of the one who sends a signal to stop others, not of one that died by it (a launcher's
# teardown: `Sending process 12 closing signal SIGTERM`, `Killing subprocess 123`)
_SENDING_RE = re.compile(r"(?i)\b(?:send(?:s|ing)?|sent|forward(?:s|ing)?|closing signal|killing|will (?:be )?kill)\b")
_BY_WORDS = {words.lower(): name for words, name in SRUN_WORDS.items() if words not in ("Quit", "Killed", "Terminated")}
_NAMED_RE = re.compile(
    r"\b(SIG[A-Z][A-Z0-9]{1,6})\b|(?i:\b(" + "|".join(re.escape(w) for w in _BY_WORDS) + r"|segfault)\b)"
)
_BY_WORDS["segfault"] = "SIGSEGV"
# words one of WORDINGS holds, lower-cased: a line without any is not read further (a tail's every line
# is tried: substring tests, not a case-blind regex)
_KEYS = (
    "exit",
    "status",
    "code",
    "rc=",
    "rc:",
    "rc =",
    "signal",
    "sig",
    "oom",
    "dumped",
    *(w.lower() for w in SRUN_WORDS),
)


@dataclass(frozen=True, slots=True)
class Ended:
    """An end a line reports: its exit status (None where it names a signal only), the signal
    (by the status or by name), and the cause it reads as."""

    code: int | None
    signal: str | None
    cause: str
    said: str


def signal_of(token: str) -> str | None:
    """SIGKILL for `9` or `SIGKILL`; None for a name that is no signal."""
    if token.isdigit():
        return signal_name(int(token)) if 0 < int(token) < 65 else None
    name = token.upper()
    return name if name in SIGNAL_CAUSES or name.startswith("SIGRT") else None


def named_signal(words: str) -> str | None:
    """The signal the words name by its name or glibc's words for it (`SIGBUS`, `segmentation
    fault`), None where they name none."""
    if m := _NAMED_RE.search(words):
        return signal_of(m.group(1)) if m.group(1) else _BY_WORDS[m.group(2).lower()]
    return None


def cause_of(signal: str | None, code: int | None, words: str) -> str:
    """The cause of an end: who sent it where the words say (SENDERS), else the signal's
    (SIGNAL_CAUSES), else a non-zero status's: a crash."""
    for rx, cause in _SENDER_RES:
        if rx.search(words):
            return cause
    if signal:
        return SIGNAL_CAUSES.get(signal, Cause.EXTERNAL_SIGNAL)
    return Cause.CRASH


def may_end(words: str) -> bool:
    """Whether the words hold one of the words an end is reported with (a cheap test first)."""
    low = words.lower()
    return any(key in low for key in _KEYS)


def ended(words: str) -> Ended | None:
    """The end the program's words report (WORDINGS), None where they report none: no status, a
    status of 0, a teardown's own line, or code a traceback shows."""
    if not may_end(words) or CODE_RE.match(words) or _SENDING_RE.search(words):
        return None
    for rx in _COMPILED:
        m = rx.search(words)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("oom"):
            return Ended(None, "SIGKILL", Cause.OOM, m.group())
        said = groups.get("words") or groups.get("words2")
        if said:
            return Ended(None, SRUN_WORDS[said], cause_of(SRUN_WORDS[said], None, words), m.group())
        if groups.get("sig") is not None:
            named = signal_of(groups["sig"])
            if named is None:
                continue
            return Ended(None, named, cause_of(named, None, words), m.group())
        code = int(groups["code"])
        if code == 0:
            return None
        signal = exit_signal(code, shell=True)
        return Ended(code, signal, cause_of(signal, code, words), m.group())
    return None
