"""logsage: hand-written NCCL/SLURM/plain logs, real cpu_gloo logs, the CLI, LLM mode over HTTP."""

from __future__ import annotations

import csv
import gzip
import json
import random
import shutil
from pathlib import Path

import pytest

from faultloop import logsage
from faultloop.logsage import modes, prefilter, rules
from faultloop.faults import ERRORS_NOT_FOUND, FAULTS, NO_LOGS, RESTART, STOP
from faultloop.llm import LLMSettings
from openai_server import OpenAIServer, Reply, openai_server  # noqa: F401

DATA = Path(__file__).parent / "data" / "logs"
CORPUS = DATA / "cpu_gloo"
TRUTH = DATA / "cpu_gloo_truth.tsv"
TOOLS = [t for t in ("rg", "grep") if shutil.which(t)]


def verdict(name: str, prefilter: str = "auto") -> logsage.Verdict:
    return logsage.analyze_log(DATA / name, logsage.Settings(prefilter=prefilter))


# -- GPU-cluster logs (NCCL wording, srun / torchrun prefixes) ---------------------------------


@pytest.mark.parametrize(
    "name, restart, primary, category, fault_type",
    [
        # 15 ranks print the NCCL watchdog timeout; rank 11 says nothing and is killed by srun
        ("nccl_hang_16r.log", RESTART, [11], "hang", "SIGSTOP"),
        # every rank times out; only rank 3's stack dump waits on the device, not in a collective
        ("nccl_gpu_hang_stacks_8r.log", RESTART, [3], "hang", "GPU_SLEEP"),
        # every rank times out; monitoredBarrier names the missing one
        ("nccl_barrier_4r.log", RESTART, [2], "hang", None),
        # rank 9's own CUDA error; the others see ncclRemoteError and abort afterwards
        ("nccl_cuda_error_16r.log", STOP, [9], "gpu_error", "GPU_ERROR"),
        # torchrun [defaultN]: prefixes, faulthandler on rank 4, ChildFailedError summary
        ("torchrun_segfault_8r.log", STOP, [4], "crash", "SEGFAULT"),
        # rank 6 dies silently; only srun's task line says how
        ("nccl_sigkill_8r.log", STOP, [6], "crash", "SIGKILL"),
    ],
)
def test_gpu_cluster_logs(name: str, restart: str, primary: list[int], category: str,
                          fault_type: str | None) -> None:
    v = verdict(name)
    assert (v.restart, v.primary_ranks, v.fault_category, v.fault_type) == (restart, primary, category, fault_type)
    assert set(primary).isdisjoint(v.secondary_ranks)
    assert v.secondary_ranks, "victims must be reported as secondary"
    assert v.evidence and all(e.line > 0 for e in v.evidence)


def test_hang_victims_are_secondary_and_root_cause_is_not_trusted() -> None:
    v = verdict("nccl_hang_16r.log")
    assert v.secondary_ranks == [r for r in range(16) if r != 11]
    assert {e.kind for e in v.evidence} >= {"collective_timeout"}


def test_evidence_line_numbers_point_at_the_text() -> None:
    lines = (DATA / "nccl_cuda_error_16r.log").read_text().splitlines()
    for ev in verdict("nccl_cuda_error_16r.log").evidence:
        assert ev.text.split()[0] in lines[ev.line - 1], ev


# -- plain failures, scheduler events, nothing wrong -------------------------------------------


@pytest.mark.parametrize(
    "name, restart, primary, category, fault_type",
    [
        ("single_traceback.log", STOP, [0], "exception", "WORKLOAD_EXC"),
        ("single_cuda_oom.log", STOP, [0], "oom", None),
        ("slurm_oom_kill.log", STOP, [0], "oom", None),
        ("slurm_preempted.log", RESTART, [], "external_signal", None),
        ("slurm_cancelled.log", RESTART, [], "external_signal", None),
        ("slurm_time_limit.log", STOP, [], "other", None),
        ("clean_completion.log", STOP, [], "none", None),  # upstream: application done -> STOP
        ("no_errors.log", ERRORS_NOT_FOUND, [], "none", None),
        ("empty.log", NO_LOGS, [], "none", None),
    ],
)
def test_plain_logs(name: str, restart: str, primary: list[int], category: str, fault_type: str | None) -> None:
    v = verdict(name)
    assert (v.restart, v.primary_ranks, v.fault_category, v.fault_type) == (restart, primary, category, fault_type)


def test_missing_file_is_no_logs(tmp_path: Path) -> None:
    assert logsage.analyze_log(tmp_path / "absent.log").restart == NO_LOGS


def test_lines_input_and_checkpoint_reported_but_decision_kept() -> None:
    lines = (DATA / "nccl_sigkill_8r.log").read_text().splitlines()
    lines.insert(9, "7:  [2026-11-30 12:00:30] successfully saved checkpoint from iteration 500 to /ckpt")
    v = logsage.analyze_log(lines)
    assert v.checkpoint_saved and v.restart == STOP and v.primary_ranks == [6]
    assert v.to_text().rstrip().endswith("checkpoint_saved: true")


def test_text_form_is_upstreams_five_parts() -> None:
    text = verdict("nccl_cuda_error_16r.log").to_text().splitlines()
    assert text[0] == STOP
    assert text[2].startswith("Attribution: Primary issues: [9], Secondary issues: [0, 1, ")
    assert text[4] == "checkpoint_saved: false" and len(text) == 5


def test_policy_matches_the_fault_table_for_every_injected_fault() -> None:
    for name, fault in FAULTS.items():
        assert logsage.POLICY[name].restart == fault.restart
        assert logsage.POLICY[name].category == fault.category
    assert set(rules.WHAT_HAPPENED) == set(logsage.POLICY), "every cause needs its explanation wording"


def test_every_rule_regex_needs_one_of_its_anchors() -> None:
    for rule in logsage.RULES:
        assert rule.anchors, rule.name
        assert prefilter.ANCHORS and all(a in prefilter.ANCHORS for a in rule.anchors)


# -- streaming, prefilter equivalence, fingerprint ---------------------------------------------


def _big_log(path: Path, n_lines: int) -> list[tuple[int, str]]:
    """A log with rare evidence lines scattered through many ordinary ones (crosses 8 MB blocks)."""
    rnd = random.Random(7)
    planted = []
    with open(path, "w") as f:
        for i in range(1, n_lines + 1):
            if rnd.random() < 0.0005:
                text = f"{i % 8}: RuntimeError: [pair.cc:553] Connection closed by peer [10.0.0.{i % 7}]:2200{i % 9}"
                planted.append((i, text))
            else:
                text = (f"{i % 8}: [2026-11-30 12:00:00.{i % 999999:06d}] iteration {i:8d}/ 9999999 | consumed "
                        f"samples: {i * 64:12d} | lm loss: 2.5E+00 | grad norm: 0.8 |")
            f.write(text + "\n")
    return planted


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, str]]]:
    path = tmp_path_factory.mktemp("big") / "big.log"
    return path, _big_log(path, 200_000)  # ~25 MB: several 8 MB blocks, and 3 tool ranges


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("jobs", [1, 3])
def test_tool_and_python_prefilters_agree_across_blocks(big_log: tuple[Path, list[tuple[int, str]]], tool: str,
                                                        monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    path, planted = big_log
    monkeypatch.setattr(prefilter, "MIN_RANGE_BYTES", 1 << 20)
    grep_hits = [(h.line, h.offset, h.text) for h in prefilter.scan_tool(path, shutil.which(tool) or tool, jobs)]
    py_hits = [(h.line, h.offset, h.text) for h in prefilter.scan_python(path)]
    assert grep_hits == py_hits
    assert [(line, text) for line, _, text in py_hits] == planted
    with open(path, "rb") as f:  # offsets point at the line starts
        for line, offset, text in py_hits[:50]:
            f.seek(offset)
            assert f.readline().decode().rstrip("\n") == text


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_prefilters_give_the_same_verdict(name: str) -> None:
    reference = verdict(name, "python").to_json()
    for tool in TOOLS:
        assert verdict(name, tool).to_json() == reference, tool


def test_fingerprint_follows_settings() -> None:
    a = logsage.analyzer_fingerprint(("deterministic", None, None))
    assert a == logsage.analyzer_fingerprint(("deterministic", None, None))
    assert a != logsage.analyzer_fingerprint(("llm", "m", "http://x"))
    assert verdict("empty.log").analyzer_version == a


# -- CLI ---------------------------------------------------------------------------------------


def test_cli_writes_both_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_t, out_j = tmp_path / "a" / "logsage.txt", tmp_path / "a" / "logsage.json"
    rc = logsage.main(["--log-path", str(DATA / "torchrun_segfault_8r.log"), "--format", "json",
                       "--output-text", str(out_t), "--output-json", str(out_j)])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out_j.read_text())
    assert printed["primary_ranks"] == [4] and printed["mode"] == "deterministic"
    assert out_t.read_text().startswith(STOP + "\n")


def test_cli_upstream_mode_without_package_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    if not modes.missing_module("logsage"):
        pytest.skip("upstream logsage is installed here")
    assert logsage.main(["--log-path", str(DATA / "empty.log"), "--mode", "upstream"]) == 2
    assert "not installed" in capsys.readouterr().err


# -- LLM mode over real HTTP -------------------------------------------------------------------


def _llm(server: OpenAIServer, **kw: float) -> logsage.Settings:
    settings = LLMSettings(server.base_url, "test-model", api_key_env="FAULTLOOP_TEST_NO_KEY", **kw)  # type: ignore[arg-type]
    return logsage.Settings(mode="llm", llm=settings)


def test_llm_good_answer_keeps_deterministic_beside(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply.json({
        "restart": STOP, "primary_ranks": [9], "secondary_ranks": [0, 1], "fault_category": "gpu_error",
        "fault_type": "GPU_ERROR", "explanation": "rank 9 hit an illegal memory access"}))
    v = logsage.analyze_with_llm(DATA / "nccl_cuda_error_16r.log", _llm(openai_server))
    out = v.to_json()
    assert out["mode"] == "llm" and out["llm_error"] is None
    assert out["explanation"] == "rank 9 hit an illegal memory access" and out["secondary_ranks"] == [0, 1]
    assert out["deterministic"]["primary_ranks"] == [9] and out["deterministic"]["mode"] == "deterministic"
    (req,) = openai_server.requests
    prompt = req.body["messages"][1]["content"]
    assert "illegal memory access" in prompt and "deterministic_verdict" in prompt


def test_llm_malformed_answer_falls_back(openai_server: OpenAIServer) -> None:
    openai_server.script(*[Reply("{not json") for _ in range(3)])
    v = logsage.analyze_with_llm(DATA / "nccl_hang_16r.log", _llm(openai_server, max_retries=1))
    out = v.to_json()
    assert out["mode"] == "deterministic" and out["requested_mode"] == "llm"
    assert "malformed JSON" in out["llm_error"]
    assert (out["restart"], out["primary_ranks"]) == (RESTART, [11])
    assert len(openai_server.requests) == 2


def test_llm_timeout_falls_back(openai_server: OpenAIServer) -> None:
    late = Reply.json({"restart": STOP, "primary_ranks": [], "secondary_ranks": [], "fault_category": "other",
                       "fault_type": None, "explanation": "late"}, delay_s=2.0)
    openai_server.script(late, late)
    v = logsage.analyze_with_llm(DATA / "torchrun_segfault_8r.log", _llm(openai_server, timeout_s=0.3, max_retries=0))
    out = v.to_json()
    assert out["mode"] == "deterministic" and "timed out" in out["llm_error"]
    assert out["primary_ranks"] == [4]


def test_cli_llm_mode(openai_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    openai_server.script(Reply.json({
        "restart": RESTART, "primary_ranks": [11], "secondary_ranks": [], "fault_category": "hang",
        "fault_type": "GPU_SLEEP", "explanation": "rank 11 stalled"}))
    rc = logsage.main(["--log-path", str(DATA / "nccl_hang_16r.log"), "--mode", "llm", "--format", "json",
                       "--llm-base-url", openai_server.base_url, "--llm-model", "m", "--llm-timeout", "5",
                       "--llm-api-key-env", "FAULTLOOP_TEST_NO_KEY"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["mode"] == "llm" and out["fault_type"] == "GPU_SLEEP"
    assert out["deterministic"]["fault_type"] == "SIGSTOP"


# -- accuracy on real cpu_gloo logs ------------------------------------------------------------


def _corpus() -> list[dict[str, str]]:
    if not TRUTH.exists():
        return []
    with open(TRUTH) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_accuracy_on_real_cpu_gloo_logs(tmp_path: Path) -> None:
    rows = _corpus()
    assert len(rows) >= 96, "regenerate with benchmarks/make_logsage_corpus.py"
    restart_ok = only_primary = type_ok = 0
    misses = []
    for row in rows:
        log = tmp_path / "main_workload.log"  # the analyzer sees neither the truth nor a telling name
        with gzip.open(CORPUS / row["file"], "rt") as src:
            log.write_text(src.read())
        v = logsage.analyze_log(log)
        fault, rank = row["fault"], int(row["rank"])
        restart_ok += v.restart == FAULTS[fault].restart
        only_primary += v.primary_ranks == [rank]
        type_ok += v.fault_type == fault
        if v.restart != FAULTS[fault].restart or v.primary_ranks != [rank] or v.fault_type != fault:
            misses.append(f"{row['file']} {fault} r{rank}: {v.restart} {v.primary_ranks} {v.fault_type}")
    n = len(rows)
    report = f"restart {restart_ok}/{n}, only-primary {only_primary}/{n}, type {type_ok}/{n}; " + "; ".join(misses)
    assert restart_ok == n, report
    assert only_primary >= 0.95 * n, report
    assert type_ok >= 0.90 * n, report


def test_srun_labels_that_are_node_indices(tmp_path: Path) -> None:
    """srun --label with one torchrun per node: label = node, [defaultN] = local rank."""
    lines = [f"{node}: [default{local}]:> initialized rank {node * 4 + local} world_size=8"
             for node in range(2) for local in range(4)]
    lines += [
        "1: [default2]:Traceback (most recent call last):",
        '1: [default2]:  File "/w/train.py", line 90, in step',
        "1: [default2]:    torch.cuda.synchronize()",
        "1: [default2]:RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    lines += [f"{node}: [default{local}]:RuntimeError: NCCL error: remote process exited or there was a network error"
              for node in range(2) for local in range(4) if (node, local) != (1, 2)]
    v = logsage.analyze_log(lines)
    assert (v.primary_ranks, v.fault_type, v.restart) == ([6], "GPU_ERROR", STOP)
    assert v.secondary_ranks == [0, 1, 2, 3, 4, 5, 7]


def test_silent_death_without_any_exit_record() -> None:
    """No srun/launcher lines at all: the one rank that lost no peer is the one that died."""
    lines = [ln for ln in (DATA / "nccl_sigkill_8r.log").read_text().splitlines() if not ln.startswith("srun")]
    v = logsage.analyze_log(lines)
    assert (v.restart, v.primary_ranks, v.fault_category, v.fault_type) == (STOP, [6], "crash", None)
