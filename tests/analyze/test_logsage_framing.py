"""logsage's line grammar (framing.py): each prefix family peeled, in layers, innermost rank wins."""

from __future__ import annotations

import pytest

from faultloop.analyze.logsage.framing import LAYERS, Source, peel

WORDS = "FileNotFoundError: [Errno 2] No such file or directory: 'data.bin'"


@pytest.mark.parametrize(
    "prefix, source",
    [
        ("", Source(None, None, None, None)),
        ("3: ", Source(3, None, None, None)),
        ("node01: ", Source(None, "node01", None, None)),
        ("10.0.0.4: ", Source(None, "10.0.0.4", None, None)),
        ("worker-1  | ", Source(None, "worker-1", None, None)),
        ("[1,3]<stderr>:", Source(None, None, "rank", 3)),
        ("[3]<stdout>:", Source(None, None, "rank", 3)),
        ("[default3]:", Source(None, None, "default", 3)),
        ("[rank3]: ", Source(None, None, "rank", 3)),
        ("[default0]:[rank12]:", Source(None, None, "rank", 12)),
        ("0: [default1]:[rank9]:", Source(0, None, "rank", 9)),
        ("2026-05-01 10:00:00,123 - ERROR - ", Source(None, None, None, None)),
        ("2026-05-01 10:00:00,123 - train - ERROR - ", Source(None, None, None, None)),
        ("ERROR:root:", Source(None, None, None, None)),
        ("2026-05-01T10:00:00.123456789Z ", Source(None, None, None, None)),
        ("[2026-05-01 10:00:00,123] [INFO] [launch.py:151:main] ", Source(None, None, None, None)),
        ("May 01 10:00:00 node01 python3[4242]: ", Source(None, "node01", None, None)),
        ("\x1b[1;31mERROR\x1b[0m: ", Source(None, None, None, None)),
        ("E0501 10:00:00.123456  4242 api.py:12] ", Source(None, None, None, None)),
        ("(RayTrainWorker pid=4242, ip=10.0.0.2) ", Source(None, "10.0.0.2/4242", None, None)),
        ("[pod/trainer-0/pytorch] ", Source(None, "trainer-0", None, None)),
        ("  | 2024-08-23T21:52:39.473Z | ", Source(None, None, None, None)),
        ("[12345.678901] ", Source(None, None, None, None)),
        ("node01: [2026-05-01 10:00:00] [rank5]:", Source(None, "node01", "rank", 5)),
        ("worker-1  | 2: 2026-05-01 10:00:00,123 - ERROR - ", Source(2, "worker-1", None, None)),
    ],
)
def test_a_prefix_family_is_peeled_off_the_programs_words(prefix: str, source: Source) -> None:
    assert peel(prefix + WORDS) == (source, WORDS)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "slurmstepd-node3: error: Detected 1 oom_kill event",
        "srun: error: node3: task 2: Killed",
        '  File "train.py", line 3, in <module>',
        "Epoch 1: 100%|##########| 10/10",
    ],
)
def test_the_programs_own_words_are_not_taken_for_a_prefix(line: str) -> None:
    assert peel(line) == (Source(None, None, None, None), line)


def test_indentation_is_kept_for_tracebacks() -> None:
    assert peel('[rank2]:  File "x.py", line 1, in f') == (Source(None, None, "rank", 2), ' File "x.py", line 1, in f')


def test_every_layer_has_a_name_and_a_pattern() -> None:
    assert len({name for name, _ in LAYERS}) == len(LAYERS)
