"""Signal names as launchers and schedulers report them: the one helper beside `signal.Signals`.

A rank's death by a signal reaches faultloop as a number (Popen and torch: minus the signal; a
shell: 128 + the signal) or as srun's words (`srun: error: n1: task 3: Killed`).
"""

from __future__ import annotations

import signal

# glibc's strsignal texts (what srun's task report and bash print for a death by a signal, bash
# with ` (core dumped)` after it), one per signal torch and the shells name.
SRUN_WORDS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
    "Interrupt": "SIGINT",
    "Bus error": "SIGBUS",
    "Hangup": "SIGHUP",
    "Illegal instruction": "SIGILL",
    "Floating point exception": "SIGFPE",
    "Trace/breakpoint trap": "SIGTRAP",
    "CPU time limit exceeded": "SIGXCPU",
    "File size limit exceeded": "SIGXFSZ",
    "Broken pipe": "SIGPIPE",
    "Quit": "SIGQUIT",
    "User defined signal 1": "SIGUSR1",
    "User defined signal 2": "SIGUSR2",
    "Alarm clock": "SIGALRM",
    "Bad system call": "SIGSYS",
}


def signal_name(signum: int) -> str:
    """SIGKILL for 9; SIG<n> for a number this platform does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def exit_signal(exitcode: int | None, *, shell: bool = False) -> str | None:
    """The signal of a death Popen or torch reports as minus the signal (-9: SIGKILL), else None;
    with `shell`, also a shell's exit status 128 + the signal (137: SIGKILL)."""
    if exitcode is None:
        return None
    if exitcode < 0:
        return signal_name(-exitcode)
    return signal_name(exitcode - 128) if shell and 128 < exitcode < 160 else None


def srun_signal(how: str) -> str | None:
    """The signal srun's words for a task's end name (`Killed`: SIGKILL), else None."""
    return next((name for words, name in SRUN_WORDS.items() if how.startswith(words)), None)
