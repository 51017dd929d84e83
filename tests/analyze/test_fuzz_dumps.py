"""Fuzzing the dump readers (Hypothesis): random bytes, and real NCCL and gloo dumps truncated,
with bytes flipped, huge lengths written over them and deep nesting spliced in. Every input ends
in a verdict or one clear refusal naming the file, within the bounds stated below, for faultloop's
`fr` and for the copies torchfrtrace and nvrx_fr read.

A short deterministic run is part of the suite; `make fuzz` runs FAULTLOOP_FUZZ_EXAMPLES examples
per property with fresh randomness. Inputs that once broke a bound are kept in
tests/data/hostile_dumps (checked by test_dump_bounds.py) or as @example here.
"""

from __future__ import annotations

import json
import pickle
import struct
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from bounded import fuzz_settings, in_child
from conftest import NVRX_FR, TESTS
from faultloop.analyze.fr import analysis as fr
from faultloop.analyze.fr import dumps
from faultloop.analyze.kinds.torchfrtrace import sanitize
from fr_synth import make_dump

FUZZ = fuzz_settings(suite_examples=40)
# Bounds per input (a few KB): the reader's peak RSS grows by less than MEMORY_BOUND and it answers
# within TIME_BOUND_S; before the opcode walk a 9-byte file took 33 s and 12.6 GB.
MEMORY_BOUND = 64 << 20
TIME_BOUND_S = 10.0
ADDRESS_SPACE = 1 << 30  # the child's backstop, far above the bound

SEEDS = [
    *(p.read_bytes() for p in sorted((NVRX_FR / "gpu_error_2nd").glob("_dump_*"))[:3]),
    *(p.read_bytes() for p in sorted((TESTS / "data" / "gloo_dumps").glob("_dump_*"))[:2]),
    pickle.dumps(make_dump(4, 12, 1000), protocol=2),
    pickle.dumps(make_dump(4, 12, 1000), protocol=4),
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed dump with a few of the damages a crash, a disk or an attacker leaves."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        damage = draw(st.sampled_from(["truncate", "flip", "huge", "nest", "splice"]))
        if damage == "truncate":
            del data[at:]
        elif damage == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif damage == "huge":  # a length or memo index far past the file
            width = draw(st.sampled_from([1, 4, 8]))
            value = draw(st.sampled_from([0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 805_306_368, 10**11, 2**63 - 1]))
            data[at : at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        elif damage == "nest":
            opener = draw(st.sampled_from([b"(", b"]", b"}", b"(]"]))
            data[at:at] = opener * draw(st.integers(1, 5000))
        else:
            data[at:at] = draw(st.binary(max_size=64))
    return bytes(data)


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=12), st.binary(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_FIELDS = st.sampled_from(
    [
        "process_group",
        "pg_id",
        "collective_seq_id",
        "p2p_seq_id",
        "is_p2p",
        "profiling_name",
        "input_sizes",
        "input_dtypes",
        "time_created_ns",
        "state",
        "ranks",
        "desc",
        "last_enqueued_collective",
    ]
)


@st.composite
def odd_shapes(draw: st.DrawFn) -> bytes:
    """A real-shaped dump with fields of any type and shape: what a different torch version, or a
    hand-made file, may hold. Pickled as torch does (protocol 2), or as Python does by default."""
    dump = make_dump(4, draw(st.integers(1, 4)), 1000)
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.sampled_from(["entry", "pg_config", "pg_status", "top"]))
        key, value = draw(st.one_of(_FIELDS, st.text(max_size=4))), draw(_VALUES)
        entries = dump.get("entries")
        entry = entries[draw(st.integers(0, len(entries) - 1))] if isinstance(entries, list) and entries else None
        if where == "entry" and isinstance(entry, dict):
            entry[key] = value
        elif where == "pg_config" and isinstance(dump.get("pg_config"), dict):
            dump["pg_config"][draw(st.sampled_from(["0", "", "1"]))] = draw(st.one_of(_VALUES, st.just({key: value})))
        elif where == "pg_status":
            dump["pg_status"] = draw(st.one_of(_VALUES, st.just({"0": {key: value}})))
        else:
            dump[draw(st.sampled_from(["entries", "pg_config", "rank", "version"]))] = value
    return pickle.dumps(dump, protocol=draw(st.sampled_from([2, pickle.DEFAULT_PROTOCOL])))


def random_pickles() -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), st.binary(max_size=512).map(lambda b: b"\x80\x02" + b))


def _read(data: bytes) -> str:
    """fr on a folder holding the file, then the rewrite torchfrtrace's and nvrx_fr's copies go
    through: for each, 'ok' or its one-line refusal (one may refuse what the other takes: fr
    needs entries of the recorder's shape, a copy only a loadable dump)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "_dump_0"
        path.write_bytes(data)
        result = fr.analyze_dir(tmp, world_size=1)
        copies = Path(tmp) / "copies"
        copies.mkdir()
        ranks, skipped, _ = dumps.rewrite_dumps([str(path)], copies, sanitize)
        read = "ok" if result.dumps_read == [0] else result.skipped_files[0].error
        copied = "ok" if ranks == [0] else skipped[0].error
        return json.dumps([read, copied])


def _check(data: bytes) -> None:
    outcome = in_child(lambda: _read(data), memory_bytes=ADDRESS_SPACE, timeout_s=TIME_BOUND_S * 3)
    assert outcome.outcome.startswith("["), outcome  # not crashed or killed
    for answer in json.loads(outcome.outcome):
        assert answer == "ok" or ("\n" not in answer and "/_dump_0: " in answer), answer
    assert outcome.seconds < TIME_BOUND_S, outcome
    assert outcome.grew_kib << 10 < MEMORY_BOUND, outcome


@FUZZ
@given(mutated())
@example(b"\x80\x02N" + b"r" + struct.pack("<I", 805_306_368) + b".")  # the 9 bytes
def test_damaged_dumps_end_in_a_verdict_or_one_refusal(data: bytes) -> None:
    _check(data)


@FUZZ
@given(odd_shapes())
def test_dumps_of_odd_shapes_end_in_a_verdict_or_one_refusal(data: bytes) -> None:
    _check(data)


@FUZZ
@given(random_pickles())
def test_random_bytes_end_in_a_verdict_or_one_refusal(data: bytes) -> None:
    _check(data)
