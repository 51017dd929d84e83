"""Reading by shape where no row knows the wording (framing.peel_shapes, reading.py, shapes.py):
prefixes no layer lists, a rank-like token in them, Python's exception line anywhere, a launcher's
report of a child from any program, failure statements at any level; and the unknown-shape
generator (tests/unknown_shapes.py, Hypothesis): the catalog's templates and every case of the
three corpus folders behind generated prefixes and wrappers keep their verdicts.

The suite runs a few deterministic examples a property; `make fuzz` runs FAULTLOOP_FUZZ_EXAMPLES
divided by each property's cost, with fresh randomness."""

from __future__ import annotations

import json
from functools import cache

import pytest
from hypothesis import Phase, given, settings

from bounded import fuzz_settings
from conftest import REAL_LOG_FOLDERS, needs_real_logs
from faultloop.analyze.logsage import Settings, analyze_log, framing, messages
from faultloop.analyze.logsage.framing import GUESSED, NO_SOURCE, Source
from faultloop.score import corpus as evallogs
from unknown_shapes import WRAPPERS, Wrapper, stacked

SETTINGS = Settings(prefilter="python")
WORDS = "RuntimeError: CUDA error: an illegal memory access was encountered"
# the suite's examples, without shrinking (a failing example names its wrapper; shrinking reads
# the corpus hundreds of times more)
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def _fuzz(suite_examples: int, cost: int) -> settings:
    return settings(fuzz_settings(suite_examples=suite_examples, cost=cost), phases=NO_SHRINK)


# -- prefixes by their shape ------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix, source",
    [
        ("[job 7f3a] ", NO_SOURCE),
        ("[c10d] ", NO_SOURCE),
        ("(worker rank=3) ", Source(None, None, GUESSED, 3)),
        ("<rank 4> ", Source(None, None, GUESSED, 4)),
        ("{rank: 5}|", Source(None, None, GUESSED, 5)),
        ("RANK 9 :: ", Source(None, None, GUESSED, 9)),
        ("rank=2 | ", Source(None, None, GUESSED, 2)),
        ("ts=2026-05-01T10:00:00Z level=info host=node07 ", Source(None, "node07", None, None)),
        ('app="trainer job" lvl=error: ', NO_SOURCE),
        ("Jan 07 20:36:55 ", NO_SOURCE),
        ("01-May-2026 10:00:00 | ", NO_SOURCE),
        ("1777629600.123456 ", NO_SOURCE),
        ("node07 | ", Source(None, "node07", None, None)),
        ("trainer-7d9f8b-x2k4p > ", Source(None, "trainer-7d9f8b-x2k4p", None, None)),
        ("megatron.core.dist_checkpointing: ", NO_SOURCE),
        ("[a7f3] 3: ", Source(3, None, None, None)),  # a layer the grammar knows, behind a shape
        ("[a7f3] [rank5]: ", Source(None, None, "rank", 5)),
    ],
)
def test_a_prefix_no_layer_lists_is_read_by_its_shape(prefix: str, source: Source) -> None:
    assert framing.peel_shapes(prefix + WORDS) == (source, WORDS, True)


@pytest.mark.parametrize(
    "prefix, source",
    [
        ("2026-05-01T10:00:00.123456789Z stderr F ", NO_SOURCE),  # CRI
        ("2026-05-01T10:00:00+0200 node01 python3[4242]: ", Source(None, "node01", None, None)),  # short-iso
        ("May 01 10:00:00.123456 node01 python3[4242]: ", Source(None, "node01", None, None)),  # short-precise
        ("Fri 2026-05-01 10:00:00 CEST node01 python3[4242]: ", Source(None, "node01", None, None)),  # short-full
        ("[12345.678901] node01 kernel: ", Source(None, "node01", None, None)),  # short-monotonic
    ],
)
def test_cri_and_journalds_formats_are_layers_of_the_grammar(prefix: str, source: Source) -> None:
    assert framing.peel(prefix + WORDS) == (source, WORDS)


@pytest.mark.parametrize(
    "record, source",
    [
        ({"log": WORDS + "\n", "stream": "stderr", "time": "2026-05-01T10:00:00Z"}, NO_SOURCE),
        ({"level": "error", "msg": WORDS, "host": "node07"}, Source(None, "node07", None, None)),
        ({"rank": 2, "message": WORDS}, Source(None, None, GUESSED, 2)),
        ({"kubernetes": {"pod_name": "trainer-0"}, "log": "[rank3]:" + WORDS}, Source(None, "trainer-0", "rank", 3)),
    ],
)
def test_a_json_log_record_is_read_for_its_message_and_fields(record: dict[str, object], source: Source) -> None:
    assert framing.peel_shapes(json.dumps(record)) == (source, WORDS, True)


@pytest.mark.parametrize(
    "tag", ["[local_rank=3] ", "(local rank 3) ", "<node_rank=1> ", "[PG ID 1 PG GUID 1 Rank 3] ", "[group rank: 2] "]
)
def test_a_local_node_or_subgroup_rank_names_no_rank(tag: str) -> None:
    source, words, _ = framing.peel_shapes(tag + WORDS)
    assert (source.inner, words) == (None, WORDS)


@pytest.mark.parametrize(
    "line",
    [
        WORDS,
        "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0",
        '  File "train.py", line 3, in <module>',
        "    allow_unreachable=True, accumulate_grad=True)  # allow_unreachable flag",
        "Epoch 3: 100%|##########| 10/10",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    ],
)
def test_the_programs_own_words_are_no_shape(line: str) -> None:
    assert framing.peel_shapes(line) == (NO_SOURCE, line, False)


# -- what programs say, read by its shape -----------------------------------------------------


@pytest.mark.parametrize(
    "lines, category, restart, primary",
    [
        # Python's exception line anywhere on a line, any class a dotted module path names
        (["Caught in worker loop: ValueError: bad shape (3, 4)"], "exception", "STOP - DONT RESTART IMMEDIATE", [0]),
        (["requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='hub', port=443): Read timed out."],
         "exception", "RESTART IMMEDIATE", [0]),
        (["Exception: 'AssertionError()'"], "exception", "STOP - DONT RESTART IMMEDIATE", [0]),
        # a launcher's report of a child, from any program
        (["supervisor: worker 3 exited with exit code 137"], "crash", "STOP - DONT RESTART IMMEDIATE", [3]),
        (["launcher: rank 2 was killed by signal 9", "rank 0 is waiting"], "crash", "STOP - DONT RESTART IMMEDIATE", [2]),
        (["job runner: process 1 crashed, tearing down the others"], "crash", "STOP - DONT RESTART IMMEDIATE", [1]),
        (["task 0 terminated with non-zero status"], "crash", "STOP - DONT RESTART IMMEDIATE", [0]),
        # a failure statement at any log level
        (["INFO Local process 0 encountered an error: invalid literal for int() with base 10"], "other",
         "STOP - DONT RESTART IMMEDIATE", [0]),
        # where a row knows the words, the row decides: Megatron's async writer's I/O error is the storage's
        (["INFO Local process 0 encountered an error: [Errno 5] Input/output error"], "other", "RESTART IMMEDIATE", []),
        (["[INFO] training run failed with error: checkpoint directory missing"], "other",
         "STOP - DONT RESTART IMMEDIATE", [0]),
        # what states no failure
        (["Retrying after requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='hub', port=443)"], "none",
         "ERRORS NOT FOUND", []),
        (["worker 3 exited with exit code 0"], "none", "ERRORS NOT FOUND", []),
        (["val/MeanSquaredError: 0.125"], "none", "ERRORS NOT FOUND", []),
        (["    raise RuntimeError('boom')"], "none", "ERRORS NOT FOUND", []),
    ],
)  # fmt: skip
def test_what_programs_say_is_read_by_its_shape(
    lines: list[str], category: str, restart: str, primary: list[int]
) -> None:
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.restart, v.primary_ranks) == (category, restart, primary), v.detail


def test_a_known_row_goes_ahead_of_any_shape() -> None:
    """A launcher's line a row reads keeps the row's reading, though shapes would read it too."""
    v = analyze_log(["failed (exitcode: -9) local_rank: 2 (pid: 4242) of binary: /usr/bin/python"], SETTINGS)
    assert (v.fault_category, v.fault_type, v.primary_ranks) == ("crash", "SIGKILL", [2])
    assert v.evidence[0].rule == "rank_failed"


def test_a_rank_read_from_a_rank_like_token_is_named_as_guessed() -> None:
    lines = [
        "rank=1 | Traceback (most recent call last):",
        'rank=1 |   File "train.py", line 3, in <module>',
        "rank=1 | ValueError: bad shape",
        "rank=0 | [E ProcessGroupNCCL.cpp:566] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600046 milliseconds before timing out.",
    ]
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.primary_ranks, v.secondary_ranks) == ("exception", [1], [0])
    assert v.confidence != "high" and "rank-like token" in v.confidence_reason


def test_a_traceback_behind_words_no_shape_reads_is_read_behind_them() -> None:
    """The template found anywhere on the line: what stands before it is framing, and the record's
    other lines are read behind the same lead (another rank's lines behind it are not its)."""
    lines = [
        "myjob rank 2 >>> Traceback (most recent call last):",
        'myjob rank 3 >>>   File "other.py", line 9, in <module>',
        'myjob rank 2 >>>   File "train.py", line 3, in <module>',
        "myjob rank 2 >>>     step()",
        "myjob rank 2 >>> ZeroDivisionError: division by zero",
    ]
    v = analyze_log(lines, SETTINGS)
    assert (v.fault_category, v.primary_ranks) == ("exception", [2]), v.detail
    assert "ZeroDivisionError" in v.evidence[0].text


# -- the unknown-shape generator --------------------------------------------------------------
CATALOG = messages.load_catalog()
# the catalog's templates behind a wrapper: no wrapper names a rank for a single template, so
# the rank wrapper and the words in front of torch's prefixes (nothing to read behind) are left out
TEMPLATE_WRAPPERS = {name: WRAPPERS[name] for name in WRAPPERS if name != "rank tags"}


@pytest.mark.parametrize("family", sorted(TEMPLATE_WRAPPERS))
def test_every_template_keeps_its_verdict_behind_generated_prefixes(family: str) -> None:
    """Every catalog template, rendered alone, behind prefixes and wrappers no table lists."""

    @_fuzz(suite_examples=2, cost=40)
    @given(TEMPLATE_WRAPPERS[family])
    def behind(wrapper: Wrapper) -> None:
        changed = {}
        for template in CATALOG:
            v = analyze_log(wrapper(template.example()), SETTINGS)
            if (v.fault_category, v.restart) != (template.category, template.restart):
                changed[template.where] = (template.template[:80], v.fault_category, v.restart, v.detail[:120])
        assert not changed, (wrapper.describe, changed)

    behind()


@cache
def _cases() -> tuple[tuple[str, tuple[str, ...], tuple[object, ...]], ...]:
    """(case, its lines, its verdict's key) of every case of the three corpus folders."""
    out = []
    for case in evallogs.load_cases(*REAL_LOG_FOLDERS):
        lines = tuple(case.log.read_text(errors="replace").splitlines())
        out.append((case.name, lines, _key(list(lines))))
    return tuple(out)


def _key(lines: list[str]) -> tuple[object, ...]:
    """What must not change: the restart decision, the category and the primary ranks."""
    v = analyze_log(lines, SETTINGS)
    return (v.restart, v.fault_category, tuple(v.primary_ranks))


def changed_behind(wrapper: Wrapper) -> dict[str, tuple[object, object]]:
    """The corpus cases whose verdict changes behind the wrapper: case -> (as pasted, behind it)."""
    return {
        name: (key, got)
        for name, lines, key in _cases()
        if (wrapped := wrapper(list(lines))) != list(lines) and (got := _key(wrapped)) != key
    }


@needs_real_logs
@pytest.mark.parametrize("family", sorted(WRAPPERS))
def test_the_corpus_keeps_its_verdicts_behind_generated_prefixes(family: str) -> None:
    @_fuzz(suite_examples=2, cost=100)
    @given(WRAPPERS[family])
    def behind(wrapper: Wrapper) -> None:
        changed = changed_behind(wrapper)
        assert not changed, (wrapper.describe, changed)

    behind()


@needs_real_logs
@_fuzz(suite_examples=3, cost=100)
@given(stacked())
def test_the_corpus_keeps_its_verdicts_behind_two_generated_wrappers(wrapper: Wrapper) -> None:
    changed = changed_behind(wrapper)
    assert not changed, (wrapper.describe, changed)
