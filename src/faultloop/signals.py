"""Signal names as launchers and schedulers report them: the one helper beside `signal.Signals`.

A rank's death by a signal reaches faultloop as a number (Popen and torch: minus the signal; a
shell: 128 + the signal) or as srun's words (`srun: error: n1: task 3: Killed`).
"""

from __future__ import annotations

import signal

# srun's words for a task's death by a signal (glibc's strsignal), as its task report prints them.
SRUN_WORDS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
    "Interrupt": "SIGINT",
    "Bus error": "SIGBUS",
    "Hangup": "SIGHUP",
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
