"""torchrun (torch.distributed.run) and torch.distributed.elastic's agent, with its rendezvous.

The agent reports each worker's end (`failed (exitcode: N) local_rank: L (pid: P)`), tears the
others down (`Sending process P closing signal SIGTERM`), and closes with ChildFailedError's
summary: `Failures:` (the workers it stopped, or others that failed) and `Root Cause (first
observed failure):`, one record per rank (`rank : R (local_rank: L)` above `exitcode : N (pid:
P)`). A signal to the agent itself is `SignalException: Process P got signal: N` and `Received
{sig} death signal, shutting down workers`. Its own failure to rendezvous is a launch failure.

Versions, read in the released wheels' sources (torch 1.10.2 ... 2.13.0):
  * `Received {sig} death signal`: an f-string before torch 2.1 (`Received 15 death signal`); from
    2.1 a logging `%s` of a `signal.Signals`, whose str() is `Signals.SIGTERM` under Python < 3.11
    and `15` under Python >= 3.11 (IntEnum's str changed there): both forms live on.
  * `Unable to shutdown process P via S, forcefully exitting via S`: spelt `exitting` before 2.0,
    `exiting` from 2.0; S is a number, or `Signals.SIGTERM` from 2.1 under Python < 3.11.
  * the summary's `exitcode : -9 (pid: P)` gains the signal's name (` SIGKILL`) in 2.12.
  * RendezvousError and its Closed/Timeout/Connection/State subclasses since 1.9;
    RendezvousGracefulExitError (2.4) is a normal end, not a failure.
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import (
    CLOSED,
    DEATH,
    FATAL,
    JOB_SIGNAL,
    KILLED,
    PEER_LOST,
    RECORD,
    STALL,
    SUMMARY,
    Cause,
    Rule,
)

AGENT = ("torch", "torch/distributed/elastic/agent/server/api.py")
PROCESSES = ("torch", "torch/distributed/elastic/multiprocessing/api.py")
ERRORS = ("torch", "torch/distributed/elastic/multiprocessing/errors/__init__.py")
RENDEZVOUS = ("torch", "torch/distributed/elastic/rendezvous/api.py, dynamic_rendezvous.py")
NVRX_RENDEZVOUS = ("NVRx", "src/nvidia_resiliency_ext/fault_tolerance/ft_rendezvous_barrier.py")

# fmt: off
# the agent could not rendezvous with its peers: no worker was started (a launch failure)
FAILURE_ROWS: tuple[Rule, ...] = (
    # `torchrun --standalone` names its rendezvous by a random UUID (run.py) and hosts its store on this
    # host: a keep-alive that failed there is this host stalling (memory pressure, swap), no node lost
    Rule("keep_alive_standalone", STALL, ("ailed",),
         r"has failed to send a keep-alive heartbeat to the rendezvous '[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}'",
         origin=RENDEZVOUS),
    # an agent's keep-alive to the rendezvous failed (dynamic_rendezvous, torch >= 1.9): sent only once a
    # rendezvous completed and its workers run, so the node hosting it, or the way there, was lost mid-run
    Rule("keep_alive_failed", PEER_LOST, ("ailed",), r"has failed to send a keep-alive heartbeat to the rendezvous",
         Cause.NODE_FAIL, RENDEZVOUS),
    # the rendezvous a peer agent closed as its run ended (set_closed on its shutdown; dynamic_rendezvous's
    # join raises this to "signal completion to nodes that arrive late", api.py): a consequence, not this
    # agent's own launch failure
    Rule("rendezvous_closed", FATAL, ("rror",), r"RendezvousClosedError\b", Cause.RENDEZVOUS_CLOSED, RENDEZVOUS),
    Rule("rendezvous_failed", FATAL, ("rror",), r"Rendezvous(?:Connection|Timeout|State|)Error\b", Cause.LAUNCH_ENV,
         RENDEZVOUS),
    # NVRx's ft_launcher (a fork of this agent): its barrier rendezvous refuses a node over max_nodes, logs why
    # and raises RendezvousClosedError (fault_tolerance/ft_rendezvous_barrier.py, 0.5 on)
    Rule("ft_rendezvous_full", FATAL, ("rror",), r"Maximum number of nodes \(\d+\) exceeded\. Active participant count",
         Cause.LAUNCH_ENV, NVRX_RENDEZVOUS),
)
# a record's `rank :` line, which stands right above its `exitcode :` line (_FAILURE_FORMAT_TEMPLATE)
RECORD_RANK_RE = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("agent_signal", JOB_SIGNAL, ("ignal",),
         r"Received (?:Signals\.)?(?:SIG[A-Z0-9]+|\d+) death signal|SignalException: Process \d+ got signal", origin=AGENT),
    Rule("rank_failed", DEATH, ("exit",),
         r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+)(?: \(pid: (?P<pid>\d+)\))?", origin=PROCESSES),
    Rule("launcher_close", CLOSED, ("ignal",), r"Sending process (?P<pid>\d+) closing signal", origin=PROCESSES),
    Rule("launcher_kill", KILLED, ("exit",),
         r"Unable to shutdown process (?P<pid>\d+) via (?:Signals\.)?\w+, forcefully exit?ting", origin=PROCESSES),
    Rule("summary_first", SUMMARY, ("ailure",), r"Root Cause \(first observed failure\)", "first", ERRORS),
    Rule("summary_others", SUMMARY, ("ailure",), r"^Failures:", "others", ERRORS),
    # a record flattened onto one line; in the printed form the rank is read from the line above
    Rule("summary_record", RECORD, ("exit",),
         r"\brank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\).*?exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?",
         origin=ERRORS),
    Rule("summary_exit", RECORD, ("exit",), r"^\s*exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?", origin=ERRORS),
)
# fmt: on
# the agent's own traceback (torchrun's entry point, the launcher API, the agent)
FRAMES = r"torch/distributed/run\.py|torch/distributed/launcher/|torch/distributed/elastic/agent/|/bin/torchrun\b"
REPORT_EXCEPTIONS = ("ChildFailedError", "SignalException")
# after its workers ended, the agent waits for the other agents (api.py's _exit_barrier, 1.9 on) and logs
# `Error waiting on exit barrier. Elapsed: N seconds` with the store's exception: its wait, not a worker's failure
AFTER_RUN = r"^_exit_barrier$"
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = AGENT
