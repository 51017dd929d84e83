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
}


def signal_name(signum: int) -> str:
    """SIGKILL for 9; SIG<n> for a number this platform does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def exit_signal(exitcode: int | None) -> str | None:
    """The signal of a death Popen or torch reports as minus the signal (-9: SIGKILL), else None."""
    if exitcode is None or exitcode >= 0:
        return None
    return signal_name(-exitcode)


def srun_signal(how: str) -> str | None:
    """The signal srun's words for a task's end name (`Killed`: SIGKILL), else None."""
    return next((name for words, name in SRUN_WORDS.items() if how.startswith(words)), None)
