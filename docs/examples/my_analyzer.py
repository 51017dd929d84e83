"""A user's log analyzer, wired into faultloop as a `command` analyzer (docs/analyzers.md).

It knows nothing of faultloop: it reads the log named on its command line and prints a verdict
as JSON. Its rule: the rank whose own lines report a death signal or an uncaught exception first.
"""

import json
import re
import sys

LABEL = re.compile(r"^\s*(?:\d+: )?\[(?:rank|default)(\d+)\]:|^\s*(\d+): ")
FATAL = re.compile(r"Signals?\.?\s*\d*\s*\((SIG\w+)\)|Fatal Python error|Traceback \(most recent call last\)")
SIGNAL_FAULT = {"SIGKILL": "SIGKILL", "SIGSEGV": "SEGFAULT", "SIGABRT": "OS_ABORT", "SIGTERM": "SIGTERM"}

culprit, fault = None, None
with open(sys.argv[1], errors="replace") as log:
    for line in log:
        label, fatal = LABEL.match(line), FATAL.search(line)
        if fatal and label and culprit is None:
            culprit, fault = int(label.group(1) or label.group(2)), SIGNAL_FAULT.get(fatal.group(1) or "")
print(json.dumps({
    "restart": "STOP - DONT RESTART IMMEDIATE" if culprit is not None else "ERRORS NOT FOUND",
    "primary_ranks": [] if culprit is None else [culprit], "secondary_ranks": [],
    "fault_category": "crash" if fault else "exception" if culprit is not None else "none",
    "fault_type": fault, "explanation": f"rank {culprit} reported the first fatal error",
}))
