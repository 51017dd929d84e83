"""Fuzzing every parser of what a user writes (Hypothesis): pool strings and pool TSVs, the config
and site files, `key=value` overrides, and the tracking TSV of an adopted session. Whatever the
input, never a traceback: it is accepted, or refused with the module's own error whose message
names the file, the row or the field.

A short deterministic run is part of the suite; `make fuzz` runs FAULTLOOP_FUZZ_EXAMPLES examples
per property with fresh randomness. Inputs that once raised are kept as @example here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from bounded import fuzz_settings
from conftest import REPO
from faultloop.adopt.tracking import AdoptError, read_tracking
from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.faults import FAULTS
from faultloop.plan import config
from faultloop.plan.pool import PoolError, load_pool, read_pool_file

FUZZ = fuzz_settings(suite_examples=60)
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

# The pieces real pools, configs and tracking files are written in, and the damage a spreadsheet,
# an editor or a truncated copy does to them.
POOL_WORDS = st.sampled_from(
    [*FAULTS, "sigkill", "mid", "last", "0", "1", "5", "2", "3", "-1", "1e3", "0x10", "９", "\u0661", "9" * 5000,
     "FAULT_TYPE", "RANK", "ITER", "NODES", "ATTEMPTS", "#", "", " ", "\t", ":", "::", "\ufeff", "\r", "é", "\x00"]
)  # fmt: skip
SEPARATORS = st.sampled_from(["\t", " ", ":", "\t\t", ",", ""])
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r", "\n\n", "\t\t\n"])


@st.composite
def pool_texts(draw: st.DrawFn) -> str:
    """A pool TSV: often a real header and rows, with damage spliced in."""
    lines = []
    if draw(st.booleans()):
        lines.append(
            draw(st.sampled_from(["FAULT_TYPE\tRANK\tITER\tNODES", "FAULT_TYPE\tRANK\tITER\tNODES\tATTEMPTS"]))
        )
    for _ in range(draw(st.integers(0, 6))):
        words = draw(st.lists(POOL_WORDS, max_size=7))
        lines.append(draw(SEPARATORS).join(words))
    end = draw(LINE_ENDS)
    text = end.join(lines)
    return draw(st.sampled_from(["", "\ufeff"])) + text + draw(st.sampled_from(["", end]))


@FUZZ
@given(st.lists(st.one_of(POOL_WORDS, st.text(max_size=8)), max_size=8).map(":".join), st.integers(1, 8))
@example("SIGKILL:" + "9" * 5000 + ":5:2", 4)
def test_a_pool_string_is_accepted_or_refused_by_token(spec: str, gpus: int) -> None:
    try:
        cells = load_pool(pool_spec=spec + " SIGKILL:0:5:1", gpus_per_node=gpus, max_attempts=5)
    except PoolError as error:
        assert error.problems and all("pool token" in p for p in error.problems), error.problems
    else:
        assert cells


@FUZZ
@given(st.one_of(pool_texts(), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))), st.booleans())
@example("FAULT_TYPE\tRANK\tITER\tNODES\n\xff\xfe", True)
def test_a_pool_file_is_accepted_or_refused_by_line(text: str, binary: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pool.tsv"
        path.write_bytes(text.encode("latin-1" if binary else "utf-8", errors="replace"))
        try:
            cells = load_pool(pool_file=path, gpus_per_node=4, max_attempts=5)
        except PoolError as error:
            assert error.problems and all(p.startswith(str(path)) for p in error.problems), error.problems
        else:
            assert cells


YAML_PIECES = st.sampled_from(
    ["gpus_per_node: 4", "gpus_per_node: four", "run_job:", "  iterations: 40", "  iterations: x", "- a", "[", "{",
     "}", ": :", "&a [*a]", "!!python/object:os.system ls", "? x", "'", '"', "\t", "workload: nope", "max_attempts: -1",
     "analyzers: {x: {kind: nope}}", "analyzers: 3", "logsage: {llm: {base_url: 1}}", "pool: 'SIGKILL:0:5:1'", "~",
     "gpus_per_nod: 4", "\ufeff", "\x00", "site_file: /nonexistent"]
)  # fmt: skip


@FUZZ
@given(st.lists(st.one_of(YAML_PIECES, st.text(max_size=12)), max_size=8).map("\n".join))
@example("!!python/object/apply:os.system ['true']")
@example("gpus_per_node: " + "9" * 5000)
def test_a_site_file_is_accepted_or_refused_naming_it(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site.yaml"
        site.write_text(text, errors="replace")
        try:
            resolved = config.resolve(BASE, {"site_file": str(site)}, check=True)
        except ConfigError as error:
            assert str(error).strip() and ("\n" not in str(error) or "  - " in str(error))
            assert str(site) in str(error) or "config key" in str(error), str(error)
        else:
            assert isinstance(resolved, dict)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["gpus_per_node", "run_job.iterations", "run_job", "max_attempts", "pool", "analyzers",
                             "rejudge", "run_job.pg_timeout_s", "nope", "", ".", "a..b", "judge.mode", "session"]),
            st.sampled_from(["4", "40", "x", "", "[", "{iterations: 40}", "{iterations: x}", "true", "1.5", "-3",
                             "null", "'", "{", "!!python/name:os.system", "SIGKILL:0:5:1", "9" * 5000]),
        ),
        max_size=4,
    )
)  # fmt: skip
@example([("run_job", "{")])
@example([("gpus_per_node", "9" * 5000)])
def test_overrides_are_accepted_or_refused_naming_the_key(pairs: list[tuple[str, str]]) -> None:
    try:
        overrides = config.parse_overrides([f"{key}={value}" for key, value in pairs])
        config.resolve(BASE, overrides, check=True)
    except ConfigError as error:
        message = str(error)
        named = [key for key, _ in pairs if key and key.split(".")[0] in message]
        assert named or "expected key=value" in message, message


TRACKING_HEADER = "\t".join(layout.TRACKING_COLUMNS)


@st.composite
def tracking_texts(draw: st.DrawFn) -> str:
    """An experiments.tsv: its header (maybe damaged) and rows of real-looking and damaged fields."""
    header = draw(
        st.sampled_from([TRACKING_HEADER, TRACKING_HEADER + "\t\t", "\ufeff" + TRACKING_HEADER, "JOB_ID", ""])
    )
    rows = []
    for _ in range(draw(st.integers(0, 5))):
        fields = {
            "JOB_ID": draw(st.sampled_from(["1234", "12_3", "a b", "", "$(rm -rf)", "*"])),
            "FAULT_TYPE": draw(st.sampled_from([*list(FAULTS)[:3], "nope", ""])),
            "RANK": draw(st.sampled_from(["0", "1", "mid", "-1", "99", "x"])),
            "ITER": draw(st.sampled_from(["5", "0", "x", "9" * 5000])),
            "NODES": draw(st.sampled_from(["1", "2", "0", ""])),
            "EXPERIMENT_DIR": draw(st.sampled_from(["n1_SIGKILL_r0_i5", "/elsewhere/x", "", "../..", "\x00"])),
        }
        values = [fields.get(column, "") for column in layout.TRACKING_COLUMNS]
        values += [""] * draw(st.integers(0, 2))  # a spreadsheet's blank trailing columns
        rows.append("\t".join(values))
    end = draw(LINE_ENDS)
    return end.join([header, *rows]) + end


@FUZZ
@given(st.one_of(tracking_texts(), st.text(max_size=200)))
def test_a_tracking_file_is_accepted_or_refused_by_line(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / "session"
        session.mkdir()
        (session / layout.TRACKING_TSV).write_text(text, errors="replace")
        try:
            runs = read_tracking(session, gpus_per_node=4)
        except AdoptError as error:
            assert error.problems and all(str(session) in p for p in error.problems), error.problems
        else:
            assert runs


def test_a_pool_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    path = tmp_path / "pool.tsv"
    path.write_bytes(b"FAULT_TYPE\tRANK\tITER\tNODES\nSIGKILL\t0\t5\t\xff\n")
    try:
        read_pool_file(path)
    except PoolError as error:
        assert error.problems == [f"{path} line 2: not UTF-8 text (byte 0xff)"]
    else:
        raise AssertionError("a pool that is not text was read")


def test_a_number_too_long_for_a_pool_is_named() -> None:
    try:
        load_pool(pool_spec="SIGKILL:0:" + "9" * 30 + ":1", gpus_per_node=4)
    except PoolError as error:
        assert error.problems == [
            f"pool token 1 'SIGKILL:0:{'9' * 30}:1': ITER must be a non-negative integer of at most 18 digits, "
            f"got '{'9' * 30}'"
        ]
    else:
        raise AssertionError("a 30-digit ITER was accepted")
