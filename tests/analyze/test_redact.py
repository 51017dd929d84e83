"""Secrets never leave for an LLM endpoint (analyze/redact.py): each shape of `SHAPES` planted in a
log is replaced, ordinary log content is not, redaction is idempotent and bounded in time on
hostile lines, and through the real HTTP client none of the planted secrets reaches a real local
OpenAI-compatible server (tests/openai_server.py records every request it receives)."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from bounded import fuzz_settings
from conftest import REPO, SHARED, TESTS
from faultloop.analyze import redact as redact_module
from faultloop.analyze import registry
from faultloop.analyze.analyzer import Input, LogSource, staged_log
from faultloop.analyze.redact import KINDS, SHAPES, Redactor, names_a_secret, redact
from faultloop.contracts import RunRecord, read_index
from faultloop.core import layout
from faultloop.faults import STOP
from openai_server import OpenAIServer, Reply, openai_server
from planted_secrets import ENDPOINT_KEY, PEM, PLANTED, PLANTED_LINES, SECRETS, assert_nothing_leaked

LOGS = TESTS / "data" / "logs"
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
# Lines an analyzer must read as they are: ranks, exit codes, addresses, NCCL and torch errors,
# hashes of commits and files, option names that merely mention a token.
ORDINARY = [
    "[rank3]: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
    "[rank3]: Exception raised from checkForNCCLErrors at 0x7f3a2b4c5d6e (most recent call first):",
    "frame #4: c10d::ProcessGroupNCCL::WorkNCCL::wait + 0x1c (0x7fd1c2a6b8e0 in libtorch_cuda.so)",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED",
    "  exitcode  : -9 (pid: 41872)  rank: 5 (local_rank: 1)",
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 (HEAD -> main, origin/main)",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 pulled",
    "TOKENIZERS_PARALLELISM=false max_tokens=512 num_tokens: 2048 PWD=/home/trainer/run",
    "srun: error: nid001234: task 7: Killed by signal 9",
    "[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but received errors while waiting",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, "
    "Timeout(ms)=600000) ran for 600102 milliseconds before timing out.",
    "https://pytorch.org/docs/stable/elastic/errors.html  user@host:~$ ssh node01",
    "token_type_ids shape torch.Size([8, 512]) secret_sharing=off password_file=/run/secrets/db",
    "key: value pairs loaded; cache_key=ab12cd34 sort_key: rank",
]


def test_every_shape_has_a_planted_secret() -> None:
    assert {kind for kind, _, _ in PLANTED} | {"private_key"} == set(KINDS)
    assert all(shape.origin for shape in SHAPES)


@pytest.mark.parametrize(("kind", "line", "secret"), PLANTED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PLANTED)])
def test_each_planted_secret_is_replaced_and_the_line_kept(kind: str, line: str, secret: str) -> None:
    redactor = Redactor([ENDPOINT_KEY])
    out = redactor.line(line)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out and redactor.counts[kind] == 1
    assert out.replace(f"[REDACTED:{kind}]", secret) == line  # the rest of the line as it was


def test_a_private_key_block_is_replaced_and_its_prefixes_kept() -> None:
    redactor = Redactor()
    out = list(redactor.lines(line + "\n" for line in ["[rank0]: loading", *PEM, "[rank0]: step 5"]))
    assert out == [
        "[rank0]: loading\n",
        *["[rank0]: [REDACTED:private_key]\n"] * 4,
        "[rank0]: -----END RSA PRIVATE KEY-----\n",
        "[rank0]: step 5\n",
    ]
    assert redactor.counts == {"private_key": 1}
    one_line = r'{"key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n", "rank": 1}'
    assert redact(one_line) == r'{"key": "[REDACTED:private_key]\n", "rank": 1}'


def test_ordinary_log_content_is_not_redacted() -> None:
    redactor = Redactor([ENDPOINT_KEY])
    assert [redactor.line(line) for line in ORDINARY] == ORDINARY and not redactor.counts


def real_logs() -> list[Path]:
    logs = sorted(LOGS.glob("*.log")) + sorted((LOGS / "cpu_gloo").glob("*.gz"))[::6]
    return logs + sorted(SHARED.glob("real_logs*/**/*.log"))[:40]


def test_real_logs_lose_nothing_to_redaction() -> None:
    """The project's corpus and the real failure logs hold no secret: a redaction there would be
    a false positive blinding the analyzer."""
    redactor = Redactor()
    read = 0
    for path in real_logs():
        data = path.read_bytes()
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", "replace")
        changed = [(line, out) for line in text.splitlines() if (out := redactor.line(line)) != line]
        assert not changed, f"{path}: {changed[:3]}"
        read += 1
    assert read >= 10


def test_names_that_say_secret() -> None:
    for name in (
        "HF_TOKEN",
        "WANDB_API_KEY",
        "aws_secret_access_key",
        "db-password",
        "client.secret",
        "APIKEY",
        "PGPASSWORD",
    ):
        assert names_a_secret(name), name
    for name in (
        "TOKENIZERS_PARALLELISM",
        "max_tokens",
        "cache_key",
        "SORT_KEY",
        "PWD",
        "password_file",
        "x.secret_sharing",
    ):
        assert not names_a_secret(name), name


# ---- properties: idempotent, never raises, bounded on hostile lines -------------------------------

FRAGMENTS = st.sampled_from(
    [*PLANTED_LINES, *ORDINARY, "sk-", "ghp_", "://", "@", ":", "=", "Bearer ", "Authorization: ", "TOKEN=",
     "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "[REDACTED:jwt]", "eyJ", ".", '"', "'", "\n", " "]
)  # fmt: skip
TEXTS = st.lists(st.one_of(FRAGMENTS, st.text(max_size=40)), max_size=30).map("".join)


@fuzz_settings(suite_examples=200)
@given(TEXTS)
@example("Authorization: Bearer [REDACTED:authorization]")
@example("TOKEN=sk-aaaaaaaaaaaaaaaaaaaaaaaa\nhttps://u:p@h")
@example(
    "[rank0]: -----BEGIN RSA PRIVATE KEY-----\n[rank0]: -----BEGIN RSA PRIVATE KEY-----export sk-proj-Q3xT9kLm2Vb7Rn4Wp8Zs"
)
def test_redaction_is_idempotent_and_never_raises(text: str) -> None:
    once = Redactor([ENDPOINT_KEY]).text(text)
    assert Redactor([ENDPOINT_KEY]).text(once) == once


HOSTILE_UNITS = [
    "a_", "sk-", "-----BEGIN ", "https://", "a:", "token=", 'token="', "token='", "--token ", "Authorization: ",
    "Bearer ", "eyJaaaaaaaaa.", "ghp_", "a://b:", "password=a ", "a.b-c_", "-----BEGIN RSA PRIVATE KEY-----\n",
]  # fmt: skip


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_a_hostile_line_is_redacted_in_bounded_time(unit: str) -> None:
    text = unit * ((1 << 20) // len(unit))  # a megabyte
    start = time.perf_counter()
    Redactor().text(text)
    assert time.perf_counter() - start < 5.0  # linear: well under a second here


# ---- end to end: the llm analyzer and NVRx's staged copy -------------------------------------------

ANSWER = {
    "restart": STOP,
    "primary_ranks": [4],
    "secondary_ranks": [],
    "fault_category": "crash",
    "fault_type": "SEGFAULT",
    "explanation": "segv",
}


def planted_log(folder: Path) -> Path:
    """A real log with every planted secret printed near its end (inside the tail the LLM reads)."""
    log = folder / layout.STRIPPED_LOG
    log.parent.mkdir(parents=True)
    lines = (LOGS / "torchrun_segfault_8r.log").read_text().splitlines()
    log.write_text("\n".join([*lines[:-5], *PLANTED_LINES, *lines[-5:]]) + "\n")
    return log


def test_the_llm_analyzer_sends_no_planted_secret(openai_server: OpenAIServer, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(ENDPOINT_KEY + "\n")
    endpoint = {"base_url": openai_server.base_url, "model": "m", "api_key_file": str(key_file), "max_retries": 0}
    spec = registry.spec_from_config(Input.LOG, "llm", {"kind": "llm", "llm": endpoint}, BASE)
    cell = tmp_path / "cell"
    log = planted_log(cell)
    openai_server.script(Reply.json(ANSWER))
    (record,) = registry.run_cell(Input.LOG, [spec], LogSource(log), cell, fresh=True)
    assert record.status == "ok", record.error
    assert_nothing_leaked(openai_server)
    prompt = openai_server.requests[0].body["messages"][1]["content"]
    assert "Segmentation fault" in prompt or "SIGSEGV" in prompt  # the log itself still goes
    assert "[REDACTED:github_token]" in prompt and "[REDACTED:private_key]" in prompt
    # every planted shape counted, in run.json and in the cell's index
    assert set(record.redactions) == set(KINDS) and record.redactions["private_key"] == 1
    assert RunRecord.read(cell / layout.analyzer_dir("llm") / layout.RUN_JSON).redactions == record.redactions
    assert read_index(cell / layout.LOGSAGE_INDEX)[0].redactions == record.redactions


def test_a_failed_llm_call_still_counts_what_it_redacted(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENDPOINT_KEY)  # the key from the environment this time
    endpoint = {"base_url": openai_server.base_url, "model": "m", "max_retries": 0}
    spec = registry.spec_from_config(Input.LOG, "llm", {"kind": "llm", "llm": endpoint}, BASE)
    cell = tmp_path / "cell"
    openai_server.script(Reply("down", status=500))
    (record,) = registry.run_cell(Input.LOG, [spec], LogSource(planted_log(cell)), cell, fresh=True)
    assert record.status == "failed" and record.redactions["url_password"] == 2
    assert_nothing_leaked(openai_server)


def test_nvrx_reads_a_redacted_copy_when_it_has_an_endpoint(tmp_path: Path) -> None:
    """NVRx's LLM kinds read the staged copy: with the endpoint's redaction it holds no secret
    (NVRx itself needs a checkout, tests/analyze/test_nvrx_live.py; this is the copy it gets)."""
    log = planted_log(tmp_path / "cell")
    redactor = Redactor([ENDPOINT_KEY])
    with staged_log(LogSource(log, staging=tmp_path / "staging"), redactor) as copy:
        text = copy.read_text()
        assert copy.name == "main_workload.log" and copy.stat().st_ino != log.stat().st_ino
    assert not [secret for secret in SECRETS if secret in text]
    assert len(text.splitlines()) == len(log.read_text().splitlines())
    assert set(redactor.counts) == set(KINDS)
    with staged_log(LogSource(log, staging=tmp_path / "staging")) as link:  # no endpoint: the log itself
        assert link.read_text() == log.read_text()


def test_a_log_copy_is_redacted_block_by_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks end at a line's end (a key block spanning two blocks too); a line longer than a
    block is cut at a space; memory stays within two blocks."""
    monkeypatch.setattr(redact_module, "FILE_BLOCK", 256)
    lines = [f"[rank{i % 8}]: step {i} loss 2.{i:03d}" for i in range(200)]
    for at, planted in zip(range(10, 200, 6), PLANTED_LINES, strict=False):
        lines[at] = planted
    long_line = " ".join(["word"] * 300 + ["HF_TOKEN=Sh0rtL1v3dT0k3n"] + ["word"] * 300)
    source = tmp_path / "main.log"
    source.write_text("\n".join([*lines, long_line, *PEM]) + "\n")
    redactor = Redactor([ENDPOINT_KEY])
    counts = redact_module.redact_file(source, tmp_path / "copy.log", redactor)
    copy = (tmp_path / "copy.log").read_text()
    assert not [secret for secret in SECRETS if secret in copy] and "Sh0rtL1v3dT0k3n" not in copy
    assert copy == Redactor([ENDPOINT_KEY]).text(source.read_text())  # the same as all at once
    assert counts == redactor.counts and counts["private_key"] == 2
