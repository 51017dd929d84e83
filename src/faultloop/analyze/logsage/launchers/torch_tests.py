"""torch's distributed test harness (torch/testing/_internal/common_distributed.py's MultiProcessTestCase and
MultiThreadedTestCase; test/test_distributed.py's TestDistBackend before 1.5): it starts one process (or
thread) per rank, joins them under the test's timeout and fails the test with a report of the ranks.

A rank it names as not ended when the time ran out never finished its part: it hung, the others ended
(a rank that raised instead exits with TEST_ERROR_EXIT_CODE and is reported with its exception, never as
timed out). Wordings: `Timeout waiting for rank N to terminate` (TestDistBackend._join_and_reduce, which
joins the ranks in order: the first still running is named), `Process N terminated or timed out after S
seconds` (MultiProcessTestCase._check_return_codes, 1.5 ... 2.13) and `Thread N terminated or timed out
after S seconds` (MultiThreadedTestCase, 2.0 on).
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import TIMEOUT, Rule

HARNESS = ("torch", "torch/testing/_internal/common_distributed.py; test/test_distributed.py before 1.5")

# fmt: off
# the harness waited for the rank it names: a barrier's missing rank
STALL_ROWS: tuple[Rule, ...] = (
    Rule("test_rank_timed_out", TIMEOUT, ("Timeout", "imed out"),
         r"(?:Timeout waiting for rank |(?:Process|Thread) )(?P<missing>\d+) "
         r"(?:to terminate|terminated or timed out after [\d.]+ seconds)", origin=HARNESS),
)
# fmt: on
FRAMES = ""  # its tracebacks report the ranks (the rows read their words), they are not a launch that failed
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = HARNESS
