"""The readings under the tables (issue 39): the generic reading of a failure statement by its
severity and words (generic.py), exit statuses and signals in any wording (exits.py), where the log
stops (temporal.py), which rank differs (spatial.py), the model of healthy lines (healthy.py), and
the verdict's `found_by`.

The acceptance property: a failure log on which logsage reports nothing holds no line that is a
failure statement by the generic reading or an exit status or signal; checked over the corpus and
over lines of programs no row knows behind the unknown-shape generator's prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from bounded import fuzz_settings
from conftest import REAL_LOG_FOLDERS, SHARED, needs_real_logs
from faultloop.analyze.logsage import Settings, analyze_log, exits, fallback, generic, healthy, spatial, temporal
from faultloop.contracts.verdicts import GENERIC, READINGS, ROW, SPATIAL, TEMPORAL, LogVerdict, RecordError
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.score import corpus as evallogs
from faultloop.signals import SRUN_WORDS
from unknown_shapes import WRAPPERS

SETTINGS = Settings(prefilter="python")

# -- the generic reading: a severity in any common framing and a failure word ------------------

# one line per framing of SEVERITIES, each with words no row of RULES knows
FRAMED = [
    ("2026-05-01 10:00:00,123 - ERROR - transport to peer 10.0.0.2 lost", generic.ERROR, "network"),
    (
        "E0501 10:00:00.123456  4242 mesh.cc:88] shard exchange with peer 3 failed: Connection refused",
        generic.ERROR,
        "network",
    ),
    ("F0501 10:00:00.123456  4242 pool.cc:12] arena exhausted: cannot allocate memory", generic.FATAL, "memory"),
    ("[E mesh.cpp:88] staging buffer corrupt at offset 4096", generic.ERROR, "program"),
    ("<error> volume /scratch unreachable: I/O error", generic.ERROR, "storage"),
    ("trainer | [ERROR] write to /ckpt denied: Permission denied", generic.ERROR, "permission"),
    ("ts=2026-05-01T10:00:00Z level=error msg=the option --zero-stage is invalid", generic.ERROR, "configuration"),
    ('{"level": "fatal", "msg": "device 3 lost: uncorrectable ECC error"}', generic.FATAL, "device"),
    ("FATAL: worker heartbeat missed, coordinator timed out", generic.FATAL, "hang"),
    ("ERROR: Unexpected segmentation fault encountered in worker.", generic.ERROR, "signal"),
    # torch's c10 logging: the month unpadded (`[E617 ...]` is June 17, `[E1128 ...]` November 28)
    ("[E617 15:17:35.519071987 mesh.cpp:681] shard exchange with peer 3 failed", generic.ERROR, "network"),
    ("[F1128 21:12:49.422069862 pool.cpp:12] arena exhausted: cannot allocate memory", generic.FATAL, "memory"),
]


@pytest.mark.parametrize("raw, level, category", FRAMED, ids=[f[0][:40] for f in FRAMED])
def test_a_severity_in_any_framing_with_a_failure_word_is_a_statement(raw: str, level: str, category: str) -> None:
    said = generic.statement(raw, raw)
    assert said is not None and (said.severity, said.category) == (level, category)


@pytest.mark.parametrize(
    "raw",
    [
        "2026-05-01 10:00:00,123 - INFO - transport to peer 10.0.0.2 lost",  # no error severity
        "2026-05-01 10:00:00,123 - ERROR - see the lines above",  # an error severity, no failure word
        "ts=2026-05-01T10:00:00Z level=error msg=see the lines above",  # the framing's own `error` is no word
        "ERROR connect to 10.0.0.2 failed, retrying in 5s",  # it goes on
        '    raise RuntimeError("failed")',  # code a traceback shows
        "TERRORS of the deep: failed",  # a word that holds ERROR is no severity
    ],
)
def test_no_statement_without_both_or_where_the_program_goes_on(raw: str) -> None:
    words = raw.split("msg=")[-1]  # what framing leaves of a logfmt line
    assert generic.statement(raw, words) is None


# -- exit statuses and signals in any wording ---------------------------------------------------


@pytest.mark.parametrize(
    "words, code, signal",
    [
        ("worker 3 exited with exit code 137", 137, "SIGKILL"),  # 128 + 9
        ("job finished, exitcode: -11", -11, "SIGSEGV"),  # minus the signal
        ("EXIT CODE: 135", 135, "SIGBUS"),
        ("train.py exited with status 1", 1, None),
        ("Command 'python train.py' returned non-zero exit status 136.", 136, "SIGFPE"),
        ("task ended, rc=134", 134, "SIGABRT"),
        ("process terminated by signal 4", None, "SIGILL"),
        ("trainer received signal SIGTRAP", None, "SIGTRAP"),
        ("the step was killed by signal 24", None, "SIGXCPU"),
        ("writer died with SIGPIPE", None, "SIGPIPE"),
        ("Killed", None, "SIGKILL"),
        ("[1]+  Killed                  python train.py", None, "SIGKILL"),
        ("/bin/bash: line 1:  4242 Bus error               (core dumped) python train.py", None, "SIGBUS"),
        ("Illegal instruction (core dumped)", None, "SIGILL"),
        ("Reason: OOMKilled", None, "SIGKILL"),
    ],
)
def test_an_exit_status_or_a_signal_in_any_wording(words: str, code: int | None, signal: str | None) -> None:
    end = exits.ended(words)
    assert end is not None and (end.code, end.signal) == (code, signal)


@pytest.mark.parametrize(
    "words",
    [
        "exit code 0",
        "registering a handler for SIGTERM",
        "Sending process 4242 closing signal SIGTERM",
        "Killing subprocess 4242",
    ],
)
def test_no_end_in_a_clean_exit_a_handler_or_a_teardowns_own_line(words: str) -> None:
    assert exits.ended(words) is None


@pytest.mark.parametrize("words, name", sorted(SRUN_WORDS.items()))
def test_every_signal_the_shells_name_reads_as_its_signal_and_a_cause(words: str, name: str) -> None:
    end = exits.ended(f"{words} (core dumped)")
    assert end is not None and end.signal == name and end.cause


@pytest.mark.parametrize(
    "words, cause",
    [
        ("task 3 killed by signal 9 (oom-kill)", "OOM"),
        ("received SIGTERM: job preempted", "PREEMPTION"),
        ("received SIGTERM from the scheduler", "EXTERNAL_SIGNAL"),
        ("received SIGTERM", "SIGTERM"),
        ("terminated by signal 11", "SEGFAULT"),
    ],
)
def test_a_signal_reads_as_what_sent_it_where_the_log_says(words: str, cause: str) -> None:
    end = exits.ended(words)
    assert end is not None and end.cause == cause


# -- the verdicts the readings give --------------------------------------------------------------


def test_a_log_of_a_program_no_row_knows_gets_a_generic_verdict_with_low_confidence() -> None:
    v = analyze_log(
        [
            "[mesh-7] step 100 loss 2.31",
            "[mesh-7] step 101 loss 2.30",
            "E0501 10:00:00.123456  4242 arena.cc:12] rank=2 arena exhausted: cannot allocate memory",
        ],
        SETTINGS,
    )
    assert (v.fault_category, v.restart, v.found_by, v.confidence) == ("oom", STOP, GENERIC, "low")
    assert v.primary_ranks == [2] and "generic reading" in v.confidence_reason


def test_a_traceback_cut_before_its_exception_line_yields_to_the_failure_statement_before_it() -> None:
    """A traceback of no named process whose exception line the excerpt cut says only that something
    raised: the failure statement before it, which no row knows, says what failed."""
    v = analyze_log(
        [
            "[E617 15:17:35.519071987 mesh.cpp:681] shard exchange with peer 3 timed out: connection lost",
            "Traceback (most recent call last):",
            '  File "train.py", line 110, in <module>',
            "    main()",
        ],
        SETTINGS,
    )
    assert (v.fault_category, v.found_by) == ("network", GENERIC), v.detail


def test_retries_that_never_succeeded_at_the_logs_end_are_a_hang_there() -> None:
    lines = ["starting job, connecting to store"] + ["peer 10.0.0.2: connection refused, retrying"] * 5
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.restart, v.found_by) == ("network", STOP, TEMPORAL)  # setup: it recurs
    progressed = ["step 10 loss 2.0", "step 11 loss 1.9", *lines[1:]]
    assert analyze_log(progressed, SETTINGS).restart == RESTART  # after progress: the link broke under it


def test_a_stack_dump_of_waiting_threads_at_the_end_is_a_hang_and_the_rank_behind_is_named() -> None:
    lines = [f"rank={r} | step 40 loss 1.5" for r in range(4)] + [f"rank={r} | step 41 loss 1.4" for r in (0, 1, 3)]
    lines += [
        "Thread 0x00007f (most recent call first):",
        '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
        '  File "/usr/lib/python3.10/queue.py", line 171 in get',
        '  File "/workspace/loader.py", line 88 in next_batch',
    ]
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.found_by, v.primary_ranks) == ("hang", TEMPORAL, [2])


def test_the_rank_missing_from_a_list_of_all_others() -> None:
    tail = temporal.TailLine(9, "", temporal.framing.NO_SOURCE, "barrier reached by ranks [0, 1, 2, 4, 5, 6, 7]")
    assert spatial.missing_from_list([tail], 8) == (3, tail)
    assert spatial.behind({0: 41, 1: 41, 2: 40, 3: 41}) == 2 and spatial.behind({0: 41, 1: 40, 2: 40}) is None


def test_a_line_a_healthy_run_prints_is_not_a_statement() -> None:
    line = "E0501 10:00:00.123 4242 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered"
    assert generic.statement(line, line) is not None and healthy.printed(line)
    assert analyze_log([line, "step 10 loss 2.0"], SETTINGS).restart == ERRORS_NOT_FOUND


def test_healthy_model_refuses_a_bad_row_naming_file_and_row(tmp_path: Path) -> None:
    bad = tmp_path / "healthy.tsv"
    bad.write_text("program\tpattern\twhy\nx\t(unclosed\tbroken\n")
    with pytest.raises(ValueError, match=r"healthy.tsv:2: pattern"):
        healthy.model.__wrapped__(bad)


def test_found_by_is_in_the_verdict_and_an_old_record_still_reads() -> None:
    v = analyze_log(["[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered"], SETTINGS)
    assert v.found_by == ROW and LogVerdict.from_json(v.to_json()).found_by == ROW
    old = {k: val for k, val in v.to_json().items() if k != "found_by"}
    assert LogVerdict.from_json(old).found_by == ""
    with pytest.raises(RecordError, match="found_by"):
        LogVerdict.from_json({**v.to_json(), "found_by": "intuition"})
    assert set(READINGS) == {"row", "generic", "temporal", "spatial"}


# -- acceptance: nothing found means no failure statement ----------------------------------------


def _statements(path: Path) -> list[str]:
    """Every line of the log that is a failure statement by the generic reading or an exit status
    or a signal (the whole log: fallback reads the tail, these logs are under TAIL_BYTES)."""
    assert path.stat().st_size <= temporal.TAIL_BYTES
    return [f"{t.line}: {t.raw}" for t, _ in fallback.statements(temporal.tail(path))]


@needs_real_logs
def test_a_failure_log_with_nothing_found_holds_no_failure_statement() -> None:
    fourth = SHARED / "real_logs_c"  # the corpus's fourth folder (labels_r6.tsv, labels_r7*.tsv)
    cases = evallogs.load_cases(*REAL_LOG_FOLDERS, *([fourth] if fourth.is_dir() else []))
    for case in cases:
        if evallogs.NONE_CATEGORY in case.categories:
            continue
        if analyze_log(case.log, SETTINGS).restart == ERRORS_NOT_FOUND:
            assert not _statements(case.log), case.name


# lines of programs no row knows: a failure statement (a severity and failure words) or an end
UNKNOWN_PROGRAM_LINES = st.sampled_from(
    [
        "ERROR shard exchange with peer 3 failed: Connection refused",
        "F0501 10:00:00.123456 4242 pool.cc:12] arena exhausted: cannot allocate memory",
        "[E mesh.cpp:88] staging buffer corrupt at offset 4096",
        "<error> volume /scratch unreachable: I/O error",
        "coordinator: trainer exited with exit code 135",
        "[1]+  Killed                  python train.py",
        "level=fatal msg=device 3 lost: uncorrectable ECC error",
    ]
)


@settings(fuzz_settings(suite_examples=12, cost=4), phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(st.sampled_from(sorted(WRAPPERS)).flatmap(lambda name: WRAPPERS[name]), UNKNOWN_PROGRAM_LINES)
def test_a_statement_behind_generated_prefixes_is_never_nothing_found(wrapper, line: str) -> None:  # type: ignore[no-untyped-def]
    lines = wrapper(["step 1 loss 2.0", "step 2 loss 1.9", line])
    v = analyze_log(lines, SETTINGS)
    assert v.restart != ERRORS_NOT_FOUND, (wrapper.describe, lines)


def test_the_rank_behind_the_others_collective_sequence_in_a_hang_is_named_by_the_spatial_reading() -> None:
    watchdog = (
        "[E ProcessGroupNCCL.cpp:719] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum={seq}, OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1806456 milliseconds "
        "before timing out."
    )
    lines = [watchdog.format(r=r, seq=7561) for r in (1, 2, 3)] + [watchdog.format(r=0, seq=7559)]
    v = analyze_log(lines, SETTINGS)
    assert (v.primary_ranks, v.found_by, v.restart, v.confidence) == ([0], SPATIAL, STOP, "medium")
    same = analyze_log([watchdog.format(r=r, seq=7561) for r in range(4)], SETTINGS)
    assert same.found_by == ROW and same.fault_type != "SLOW_RANK"


@pytest.mark.parametrize(
    "what, fault_type",
    [
        ("Floating point exception (core dumped)", "SEGFAULT"),
        ("Illegal instruction", "SEGFAULT"),
        ("Trace/breakpoint trap", "SEGFAULT"),
        ("Bus error", "SEGFAULT"),
        ("Aborted", "OS_ABORT"),
    ],
)
def test_a_rank_ended_by_any_signal_the_shells_name_is_its_crash(what: str, fault_type: str) -> None:
    v = analyze_log([f"srun: error: node1: task 1: {what}"], SETTINGS)
    assert (v.fault_category, v.fault_type, v.primary_ranks, v.found_by) == ("crash", fault_type, [1], ROW)


def test_the_only_rank_that_warns_in_a_log_that_ends_in_a_stall_is_the_candidate() -> None:
    lines = [f"rank={r} | step 40 loss 1.5" for r in range(4)]
    lines += ["rank=1 | [W reducer.cpp:120] slow gradient bucket, waited 30s", "rank=0 | no progress for 600 s"]
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.found_by, v.primary_ranks) == ("hang", TEMPORAL, [1])
    assert "only rank that warns" in v.confidence_reason


def test_a_severity_stamped_on_every_line_says_nothing_but_an_exit_status_still_does() -> None:
    stamped = [f"severity=ERROR | step {i} loss 2.0" for i in range(1, 6)]
    lost = "severity=ERROR | transport to peer 10.0.0.2 lost"
    assert analyze_log([*stamped, lost], SETTINGS).restart == ERRORS_NOT_FOUND  # a collector filed all of stderr
    v = analyze_log([*stamped, lost, "severity=ERROR | trainer exited with exit code 137"], SETTINGS)
    assert (v.fault_type, v.found_by) == ("SIGKILL", GENERIC)
    assert analyze_log([*(s.replace("ERROR", "INFO") for s in stamped), lost], SETTINGS).found_by == GENERIC
