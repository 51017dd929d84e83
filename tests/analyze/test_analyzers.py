"""faultloop.analyze.registry, baselines and torchfrtrace: any analyzer in the loop, its failures recorded,
unchanged results reused; the naive baselines on torch's real wording; torch's own FR analyzer on
sanitized copies of real dumps."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import NVRX_FR, TESTS, needs_nvrx_dumps
from faultloop.analyze import baselines
from faultloop.analyze import registry as analyzers
from faultloop.analyze.analyzer import DumpsSource, Input, LogSource, Spec
from faultloop.analyze.kinds import torchfrtrace as frpeers
from faultloop.analyze.registry import Analyzer
from faultloop.cli import analyzers as analyzers_cli
from faultloop.contracts import FrVerdict, read_index
from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.faults import ERRORS_NOT_FOUND, NO_LOGS, RESTART, STOP
from faultloop.plan import config
from openai_server import OpenAIServer, Reply, openai_server

REPO = Path(__file__).resolve().parents[2]
LOGS = TESTS / "data" / "logs"
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

# torch 2.13's launcher, one torchrun per node under srun --label (the label is the node index):
# node 1's agent reports first in the log, but node 0's failure came earlier.
TWO_NODES = """\
0: [rank0]:[W1201 10:00:00.000000 100 ProcessGroupGloo.cpp:100] Warning: step 1
1: [rank3]:Traceback (most recent call last):
1: [rank3]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.1]:1234
0: W1201 10:00:04.000000 100 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 111 closing signal SIGTERM
0: E1201 10:00:04.100000 100 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) local_rank: 1 (pid: 112) of binary: /usr/bin/python
1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
1: ============================================================
1: train.py FAILED
1: ------------------------------------------------------------
1: Root Cause (first observed failure):
1: [0]:
1:   time      : 2026-12-01_10:00:05
1:   host      : node-b
1:   rank      : 3 (local_rank: 1)
1:   exitcode  : 1 (pid: 222)
1:   error_file: <N/A>
1:   traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
0: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
0: Root Cause (first observed failure):
0: [0]:
0:   time      : 2026-12-01_10:00:04
0:   host      : node-a
0:   rank      : 1 (local_rank: 1)
0:   exitcode  : -9 (pid: 112)  (SIGKILL)
0:   error_file: <N/A>
0:   traceback : Signal 9 (SIGKILL) received by PID 112
1: ============================================================
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# ---- baselines ---------------------------------------------------------------------------------


def test_root_cause_reads_torchs_summary() -> None:
    v = baselines.torchrun_root_cause(LOGS / "torchrun_segfault_8r.log").to_json()
    assert (v["restart"], v["primary_ranks"], v["fault_type"], v["fault_category"]) == (STOP, [4], "SEGFAULT", "crash")
    assert any("exitcode  : -11" in e["text"] for e in v["evidence"])


def test_root_cause_takes_the_earliest_node_and_the_signal_annotation(tmp_path: Path) -> None:
    v = baselines.torchrun_root_cause(write(tmp_path / "two.log", TWO_NODES)).to_json()
    assert (v["primary_ranks"], v["fault_type"], v["restart"]) == ([1], "SIGKILL", STOP)
    assert "signal SIGKILL" in v["explanation"]


def test_root_cause_falls_back_to_the_first_failed_worker_line(tmp_path: Path) -> None:
    lines = [line for line in TWO_NODES.splitlines() if "Root Cause" not in line]
    # no root-cause block: node 0's `failed (exitcode: -9) local_rank: 1`, two ranks per node
    log = write(tmp_path / "nosummary.log", "\n".join(lines) + "\n")
    v = baselines.torchrun_root_cause(log).to_json()
    assert v["primary_ranks"] == [1] and v["fault_type"] == "SIGKILL"
    labelled = write(
        tmp_path / "node1.log",
        "1: E1201 failed (exitcode: 1) local_rank: 0 (pid: 9) of binary: py\n1:   rank      : 3 (local_rank: 1)\n",
    )
    v = baselines.torchrun_root_cause(labelled).to_json()  # node 1 of 2-rank nodes: local rank 0 is rank 2
    assert v["primary_ranks"] == [2] and v["fault_category"] == "exception" and v["fault_type"] is None


def test_root_cause_on_the_cpu_workload_names_crashes_not_hangs(tmp_path: Path) -> None:
    truth = [line.split("\t") for line in (LOGS / "cpu_gloo_truth.tsv").read_text().splitlines()[1:]]
    right: dict[str, int] = {}
    for name, fault, rank, *_ in truth:
        log = tmp_path / name
        log.write_bytes(gzip.decompress((LOGS / "cpu_gloo" / name).read_bytes()))
        right[fault] = right.get(fault, 0) + (
            baselines.torchrun_root_cause(log).to_json()["primary_ranks"] == [int(rank)]
        )
    per_fault = {fault: sum(row[1] == fault for row in truth) for fault in right}
    for crash in ("SIGKILL", "SEGFAULT", "OS_ABORT", "WORKLOAD_EXC"):  # the launcher's report is right
        assert right[crash] >= 0.8 * per_fault[crash], (crash, right)
    assert right["GPU_SLEEP"] == right["SIGSTOP"] == right["LOCK_GIL"] == 0  # the first to exit is a victim


def test_first_error_takes_the_first_error_looking_line(tmp_path: Path) -> None:
    v = baselines.first_error(write(tmp_path / "two.log", TWO_NODES)).to_json()
    assert v["primary_ranks"] == [3] and v["restart"] == STOP  # [rank3]: Traceback, before node 0's kill
    assert v["evidence"][0]["line"] == 2
    plain = write(tmp_path / "plain.log", "step 1\nRank 5 hit a fatal NCCL error\n")
    assert baselines.first_error(plain).to_json()["primary_ranks"] == [5]
    assert baselines.first_error(LOGS / "clean_completion.log").to_json()["restart"] == ERRORS_NOT_FOUND
    assert baselines.first_error(LOGS / "empty.log").to_json()["restart"] == NO_LOGS
    assert baselines.torchrun_root_cause(LOGS / "empty.log").to_json()["restart"] == NO_LOGS


# ---- command analyzers ---------------------------------------------------------------------------

# A user's analyzer as users write one: its own script, no faultloop import.
USER_SCRIPT = """\
import json, re, sys
log, out = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
ranks = [int(m.group(1)) for line in open(log) for m in [re.search(r"rank\\s*:\\s*(\\d+)", line)] if m]
verdict = {"restart": "STOP - DONT RESTART IMMEDIATE", "primary_ranks": ranks[-1:], "secondary_ranks": [],
           "fault_category": "crash", "fault_type": "SIGKILL", "explanation": "read " + log}
text = json.dumps(verdict)
open(out, "w").write(text) if out else print(text)
"""


def command(tmp_path: Path, line: str, timeout_s: float = 30, **kw: Any) -> Analyzer:
    return Analyzer(Spec("mine", "command", Input.LOG, timeout_s, {"command": line, "watch": []}, **kw))


@pytest.fixture
def cell_log(tmp_path: Path) -> Path:
    """A log where a cell's folder name (the injected truth) is part of the path."""
    folder = tmp_path / "n1_SIGKILL_r1_i3" / "analysis"
    folder.mkdir(parents=True)
    return write(folder / "main_workload.log", TWO_NODES)


def test_command_json_on_stdout_and_in_out_file(tmp_path: Path, cell_log: Path) -> None:
    script = write(tmp_path / "mine.py", USER_SCRIPT)
    for line in (f"{sys.executable} {script} {{log}}", f"{sys.executable} {script} {{log}} {{out}}"):
        v = command(tmp_path, line).analyze(cell_log).to_json()
        assert (v["restart"], v["primary_ranks"], v["fault_type"]) == (STOP, [1], "SIGKILL")
        # the analyzer sees the log under a neutral name: the cell's path spells the fault
        assert "SIGKILL" not in v["explanation"] and "n1_" not in v["explanation"]


def test_command_upstream_text(tmp_path: Path, cell_log: Path) -> None:
    text = (
        "RESTART IMMEDIATE\nRank 3 hung in an all_reduce.\n"
        "Attribution: Primary issues: [3], Secondary issues: [0, 1, 2]\nsome detail\ncheckpoint_saved: false\n"
    )
    out = write(tmp_path / "upstream.txt", text)
    v = command(tmp_path, f"cat {out} # {{log}}").analyze(cell_log).to_json()
    assert (v["restart"], v["primary_ranks"], v["secondary_ranks"]) == (RESTART, [3], [0, 1, 2])
    assert (v["explanation"], v["detail"], v["checkpoint_saved"], v["fault_type"]) == (
        "Rank 3 hung in an all_reduce.",
        "some detail",
        False,
        None,
    )


@pytest.mark.parametrize(
    ("line", "error", "tail"),
    [
        ("echo 'bad rank table' >&2; exit 1 # {log}", "exited with status 1", "bad rank table"),
        ("echo 'hello world' # {log}", "neither faultloop JSON nor upstream text", ""),
        ("echo '{\"primary_ranks\": [1]}' # {log}", "no 'restart' decision", ""),
        ('echo \'{"restart": "STOP", "primary_ranks": "one"}\' # {log}', "primary_ranks is not a list", ""),
        ("kill -SEGV $$ # {log}", "killed by SIGSEGV", ""),
        ("true # {log} {out}", "wrote no {out} file", ""),
    ],
)
def test_command_failures_are_recorded(tmp_path: Path, cell_log: Path, line: str, error: str, tail: str) -> None:
    outcome = command(tmp_path, line).attempt(cell_log)
    assert outcome.verdict is None and error in (outcome.error or "") and tail in outcome.stderr_tail


def test_command_hang_is_killed_with_its_children(tmp_path: Path, cell_log: Path) -> None:
    pid_file = tmp_path / "child.pid"
    start = time.monotonic()
    outcome = command(
        tmp_path, f"echo started >&2; sleep 300 & echo $! > {pid_file}; wait # {{log}}", timeout_s=1
    ).attempt(cell_log)
    assert "timed out after 1 s" in (outcome.error or "") and "started" in outcome.stderr_tail
    assert time.monotonic() - start < 60
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


# ---- configuration -------------------------------------------------------------------------------


def test_default_analyzers_and_selection(tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump({"analyzers": {"mine": {"kind": "command", "command": "x {log}"}, "first_error": None}})
    )
    base = dict(BASE, site_file=str(site))
    resolved = config.resolve(base, {})
    assert [a.name for a in analyzers.selected(resolved, Input.LOG)] == ["faultloop", "torchrun_root_cause", "mine"]
    assert [s.name for s in analyzers.selected(resolved, Input.DUMPS)] == ["faultloop", "torchfrtrace"]
    # --config analyzers=... picks among the defined ones (config file and site file), in order
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(BASE))
    overridden = dict(BASE, analyzers="mine,faultloop", site_file=str(site))  # as Snakemake hands it over
    resolved = config.resolve(overridden, {"analyzers": "mine,faultloop"}, [cfg])
    assert list(resolved["analyzers"]) == ["mine", "faultloop"] and resolved["analyzers"]["mine"]["kind"] == "command"
    resolved = config.resolve(
        dict(BASE, site_file=str(site)), {"analyzers": ["first_error"], "fr_analyzers": "faultloop"}
    )
    assert [a.kind for a in analyzers.selected(resolved, Input.LOG)] == ["first_error"]
    assert [s.name for s in analyzers.selected(resolved, Input.DUMPS)] == ["faultloop"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "nope"}, "unknown kind 'nope'"),
        ({"kind": "command", "command": "x"}, "must contain {log}"),
        ({"kind": "command", "command": "x {log}", "watch": ["missing.py"]}, "cannot read missing.py"),
        ({"kind": "faultloop", "command": "x {log}"}, "'command': not an option of kind faultloop"),
        ({"kind": "llm"}, "needs llm.base_url and llm.model"),
        ({"kind": "nvrx_logsage_package"}, "kind nvrx_logsage_package needs NVRx's log analyzer"),
        ({"kind": "command", "command": "x {log}", "timeout_s": 0}, "must be positive"),
    ],
)
def test_bad_analyzer_entries_are_named(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=r"analyzers\.bad") as info:
        analyzers.spec_from_config(Input.LOG, "bad", entry, BASE)
    assert message in str(info.value)
    with pytest.raises(ConfigError, match=r"not a kind|unknown kind 'mistyped'"):
        analyzers.resolve("mistyped", BASE)


def test_renamed_kinds_keep_working_with_one_deprecation_line(capsys: pytest.CaptureFixture[str]) -> None:
    entries = {"analyzers": {"old": {"kind": "builtin"}}, "fr_analyzers": {"old": {"kind": "builtin"}}}
    for _ in range(2):  # said once per process
        resolved = config.resolve(dict(BASE, **entries), {}, check=True, analyzer_schema=analyzers.config_schema())
        log, fr = analyzers.selected(resolved, Input.LOG), analyzers.selected(resolved, Input.DUMPS)
        assert (log[0].kind, fr[0].kind) == ("faultloop", "faultloop_fr")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "faultloop: config key 'analyzers.old': kind 'builtin' is deprecated, use 'faultloop' "
        "(accepted until the next release)",
        "faultloop: config key 'fr_analyzers.old': kind 'builtin' is deprecated, use 'faultloop_fr' "
        "(accepted until the next release)",
    ]
    assert log[0].fingerprint == analyzers.resolve("faultloop", BASE).spec.fingerprint  # the same analyzer


def test_fingerprint_follows_the_watched_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "mine.py", USER_SCRIPT)
    entry = {"kind": "command", "command": "python3 mine.py {log}", "watch": ["mine.py"]}
    before = analyzers.spec_from_config(Input.LOG, "mine", entry, BASE).fingerprint
    assert analyzers.spec_from_config(Input.LOG, "mine", entry, BASE).fingerprint == before
    (tmp_path / "mine.py").write_text(USER_SCRIPT + "# a patch\n")
    assert analyzers.spec_from_config(Input.LOG, "mine", entry, BASE).fingerprint != before
    builtin = analyzers.resolve("faultloop", BASE)
    assert (
        builtin.spec.fingerprint and builtin.spec.fingerprint != analyzers.resolve("first_error", BASE).spec.fingerprint
    )


def test_resolve_gives_a_callable_for_corpus_evaluation() -> None:
    v = analyzers.resolve("torchrun_root_cause", BASE).analyze(LOGS / "torchrun_segfault_8r.log").to_json()
    assert v["primary_ranks"] == [4] and set(v) >= {
        "restart",
        "primary_ranks",
        "secondary_ranks",
        "fault_category",
        "fault_type",
        "explanation",
        "evidence",
    }
    assert analyzers.resolve("faultloop", BASE).analyze(LOGS / "torchrun_segfault_8r.log").to_json()[
        "primary_ranks"
    ] == [4]


def test_llm_kind_over_http(openai_server: OpenAIServer, tmp_path: Path) -> None:
    entry = {"kind": "llm", "llm": {"base_url": openai_server.base_url, "model": "m", "timeout_s": 5, "max_retries": 0}}
    llm = analyzers.Analyzer(analyzers.spec_from_config(Input.LOG, "llm", entry, BASE))
    openai_server.script(
        Reply.json(
            {
                "restart": STOP,
                "primary_ranks": [4],
                "secondary_ranks": [],
                "fault_category": "crash",
                "fault_type": "SEGFAULT",
                "explanation": "segv",
            }
        )
    )
    assert llm.analyze(LOGS / "torchrun_segfault_8r.log").to_json()["explanation"] == "segv"
    # a failing model is the llm analyzer's failure, not logsage's deterministic fallback
    openai_server.script(Reply("down", status=500))
    outcome = llm.attempt(LOGS / "torchrun_segfault_8r.log")
    assert outcome.verdict is None and "LLM failed" in (outcome.error or "") and "HTTP 500" in outcome.error


# ---- a cell's run: failures recorded, unchanged results reused ------------------------------------


def mine(name: str, line: str, fingerprint: str) -> Spec:
    return Spec(name, "command", Input.LOG, settings={"command": line, "watch": []}, fingerprint=fingerprint)


def test_cell_run_reuses_unchanged_results(tmp_path: Path, cell_log: Path) -> None:
    script = write(tmp_path / "mine.py", USER_SCRIPT)
    specs = [
        analyzers.resolve("faultloop", BASE).spec,
        analyzers.resolve("first_error", BASE).spec,
        mine("mine", f"{sys.executable} {script} {{log}}", "v1"),
        mine("broken", "exit 3 # {log}", "b1"),
    ]
    index = cell_log.parent / "analyzers.json"
    source = LogSource(cell_log, cell_log.parent.parent.parent / ".staging")

    def run(specs, fresh=False):
        records = analyzers.run_cell(Input.LOG, specs, source, cell_log.parent.parent, fresh=fresh)
        return {r.analyzer: r for r in records}

    first = run(specs)
    assert [r.status for r in first.values()] == ["ok", "ok", "ok", "failed"]
    assert first["broken"].error == "exited with status 3"
    assert read_index(index) == list(first.values())
    folder = cell_log.parent
    stamps = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file() and p != index}
    time.sleep(0.05)
    again = run(specs)
    assert all(r.reused for r in again.values())
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    # a new fingerprint for one analyzer re-runs only that one
    patched = run([*specs[:2], mine("mine", specs[2].settings["command"], "v2"), specs[3]])
    assert [n for n, r in patched.items() if not r.reused] == ["mine"]
    changed = {p for p in stamps if p.stat().st_mtime_ns != stamps[p]}
    assert changed and all(p.parent.name == "mine" for p in changed)
    assert [r.reused for r in run(specs, fresh=True).values()] == [False] * 4  # --forcerun logsage
    cell_log.write_text(TWO_NODES + "0: one more line\n")
    assert not any(r.reused for r in run(specs).values())  # a new run of the job: everything again


def test_param_json_hides_braces_from_snakemake() -> None:
    text = analyzers.param_json([{"command": "awk '{print $1}' {log} > {out}"}])
    assert "{log}" not in text and "{print" not in text
    assert json.loads(text) == [{"command": "awk '{print $1}' {log} > {out}"}]


# ---- FR peers: torchfrtrace on sanitized copies ----------------------------------------------------


def test_sanitize_renames_glooss_unnamed_group() -> None:
    dump = {
        "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
        "entries": [{"process_group": ("0", "default_pg"), "collective_seq_id": 1}],
    }
    notes = frpeers.sanitize(dump)
    assert dump["pg_config"] == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}} and len(notes) == 1
    nccl = {
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
        "entries": [{"process_group": ("0", "default_pg")}],
    }
    assert frpeers.sanitize(nccl) == [] and list(nccl["pg_config"]) == ["0"]


def test_parse_torchfrtrace_reports() -> None:
    output = (
        "Not all ranks joining collective, sequence number: 44791\ninternal record id: 1\n"
        "group info: 72:EXPERT_MODEL_PARALLEL_GROUP\ncollective: nccl:all_to_all\nmissing ranks: {9, 14}\n"
        "Collective sequence number: 7 has errors\ngroup info: 0:default_pg\ncollective: nccl:all_reduce\n"
        "error msg: Culprit rank 3; size mismatch, Culprit rank 5; size mismatch\n"
        "We cannot decide ... because we missed FR dumps from ranks ({1, 2}) so we ...\n"
    )
    reports, undecided = frpeers.parse_torchfrtrace(output)
    assert [(r["sequence"], r["missing_ranks"], r["culprit_ranks"]) for r in reports] == [
        (44791, [9, 14], []),
        (7, [], [3, 5]),
    ]
    assert reports[0]["group"] == "72:EXPERT_MODEL_PARALLEL_GROUP" and undecided == [1, 2]


@needs_nvrx_dumps
def test_torchfrtrace_on_real_nccl_dumps() -> None:
    verdict, _ = frpeers.analyze_torchfrtrace(
        str(NVRX_FR / "gpu_error_2nd"), world_size=16, gpus_per_node=8, segment_size=32, timeout_s=300
    )
    assert verdict.suspect_ranks == [9, 14] and verdict.details["normalised"] == []


def test_unreadable_dump_set_is_torchfrtraces_recorded_failure(tmp_path: Path) -> None:
    (tmp_path / "_dump_0").write_bytes(b"not a pickle")
    (tmp_path / "_dump_1").write_bytes(b"")
    spec = Spec("torchfrtrace", "torchfrtrace", Input.DUMPS, 60, fingerprint="fp")
    outcome = analyzers.attempt(spec, DumpsSource(str(tmp_path), 2, 2, 32))
    assert outcome.verdict is None and "no dump torchfrtrace may read" in (outcome.error or "")
    # and both analyzers on no dumps at all: a result (no_dumps), not a failure
    empty = tmp_path / "empty"
    for kind in ("faultloop_fr", "torchfrtrace"):
        result = analyzers.attempt(
            Spec(kind, kind, Input.DUMPS, 60, fingerprint="fp"), DumpsSource(str(empty), 2, 2, 32)
        )
        assert result.error is None and isinstance(result.verdict, FrVerdict) and result.verdict.no_dumps


def test_fr_cell_run_torchfrtrace_reads_sanitized_copies_never_the_originals(gloo_hang: Path, tmp_path: Path) -> None:
    cell = tmp_path / "n2_GPU_SLEEP_r1_i3"
    dumps = cell / "checkpoints"
    dumps.mkdir(parents=True)
    for path in gloo_hang.glob("_dump_*"):
        (dumps / path.name).write_bytes(path.read_bytes())
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    (dumps / "_dump_7").write_bytes(pickle.dumps({"entries": [Evil()], "pg_config": {}}))
    (cell / layout.MANIFEST).write_text("{}")
    resolved = config.resolve(dict(BASE, gpus_per_node=2), {})
    source = DumpsSource(str(dumps), 4, 2, 32, cell / layout.MANIFEST)
    records = analyzers.run_cell(Input.DUMPS, analyzers.selected(resolved, Input.DUMPS), source, cell)
    assert [(r.analyzer, r.status) for r in records] == [("faultloop", "ok"), ("torchfrtrace", "ok")]
    assert read_index(cell / layout.FR_INDEX) == records
    for name in ("faultloop", "torchfrtrace"):
        verdict = json.loads((cell / layout.fr_analyzer_dir(name) / layout.FR_JSON).read_text())
        assert verdict["suspect_ranks"] == [1], name
    torch = json.loads((cell / layout.fr_analyzer_dir("torchfrtrace") / layout.FR_JSON).read_text())
    assert torch["scope"] == "rank" and torch["dumps_read"] == [0, 1, 2, 3]
    assert "missing ranks: {1}" in (cell / layout.fr_analyzer_dir("torchfrtrace") / layout.FR_TEXT).read_text()
    assert any("renamed to '0'" in note for note in torch["normalised"])
    assert [s["file"] for s in torch["skipped_files"]] == [str(dumps / "_dump_7")] and not marker.exists()


def test_cli_list_and_try(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)  # the configuration is read from the repository root, as the workflow does
    site = tmp_path / "site.yaml"
    site.write_text("analyzers: {broken: {kind: command, command: 'exit 4 # {log}'}}\n")
    assert analyzers_cli.main(["list", f"site_file={site}"]) == 0
    listed = [line.split("\t")[:3] for line in capsys.readouterr().out.splitlines()]
    assert listed == [
        ["faultloop", "faultloop", "log"],
        ["torchrun_root_cause", "torchrun_root_cause", "log"],
        ["first_error", "first_error", "log"],
        ["broken", "command", "log"],
        ["faultloop", "faultloop_fr", "dumps"],
        ["torchfrtrace", "torchfrtrace", "dumps"],
        ["combined", "combined", "verdicts"],
    ]
    assert analyzers_cli.main(["try", "torchrun_root_cause", str(LOGS / "torchrun_segfault_8r.log")]) == 0
    assert json.loads(capsys.readouterr().out)["primary_ranks"] == [4]
    assert analyzers_cli.main(["try", "broken", str(LOGS / "torchrun_segfault_8r.log"), f"site_file={site}"]) == 1
    assert "broken failed: exited with status 4" in capsys.readouterr().err
    assert analyzers_cli.main(["try", "nope", str(LOGS / "empty.log")]) == 2
    assert "analyzers.nope" in capsys.readouterr().err
