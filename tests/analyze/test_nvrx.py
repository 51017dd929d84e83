"""NVRx's analyzers as faultloop kinds, without NVRx: the mapping on NVRx's recorded outputs, the
config-time refusals, and the run path through a stand-in checkout (a fake `nvidia_resiliency_ext`
whose fr_attribution unpickles whatever it is given, as the real one does)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import NVRX_FR, REPO, SHARED, cell_manifest, needs_nvrx_dumps
from faultloop.analyze import nvrx, registry
from faultloop.analyze.analyzer import DumpsSource, Input
from faultloop.analyze.nvrx import outputs, tools
from faultloop.analyze.running import Outcome
from faultloop.contracts import FrVerdict, Grade, LogVerdict
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError
from faultloop.faults import RESTART, STOP
from faultloop.score.grade import Truth, score_cell

BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
RECORDED = SHARED / "fixtures" / "nvrx_outputs"
needs_recorded = pytest.mark.skipif(
    not RECORDED.is_dir(),
    reason=f"NVRx's recorded outputs not found at {RECORDED} (third-party data kept outside the repo, in ../shared)",
)


def recorded(path: str) -> Any:
    return json.loads((RECORDED / path).read_text())


# ---- the Restart Agent's mapping, on what it printed ---------------------------------------------


@needs_recorded
def test_restart_agent_cell_maps_decision_ranks_and_class() -> None:
    verdict = outputs.restart_agent_verdict(recorded("restart_agent/cpu_cells/n2_SIGKILL_r1_i5.json"))
    assert isinstance(verdict, LogVerdict) and verdict.mode == nvrx.RESTART_AGENT
    assert verdict.restart == RESTART  # its retry budget: a first failure restarts
    assert verdict.primary_ranks == [0] and verdict.secondary_ranks == [1]  # cascade spread 0, 1
    assert (verdict.fault_category, verdict.fault_type) == ("exception", None)
    assert verdict.evidence[0].line == 48 and "Connection closed by peer" in verdict.evidence[0].text
    assert LogVerdict.from_json(verdict.to_json()) == verdict  # logsage.json keeps the policy
    assert verdict.extra["policy"] == {
        "decision_basis": "general_retry_available",
        "rule": "general_retry",
        "policy_version": "retry_budget.v1",
        "retry_budget_exhausted": False,
    }


@needs_recorded
@pytest.mark.parametrize(
    ("cell", "category", "fault_type"),
    [
        ("n1_SEGFAULT_r0_i5", "crash", "SEGFAULT"),  # framework_crash + segmentation_fault root
        ("n1_GPU_ERROR_r0_i5", "gpu_error", "GPU_ERROR"),  # an illegal memory access, whatever raised it
        ("n2_WORKLOAD_EXC_r1_i5", "exception", None),
    ],
)
def test_failure_class_and_fingerprint_give_category_and_type(cell: str, category: str, fault_type: str | None) -> None:
    verdict = outputs.restart_agent_verdict(recorded(f"restart_agent/cpu_cells/{cell}.json"))
    assert (verdict.fault_category, verdict.fault_type) == (category, fault_type)


@needs_recorded
def test_every_recorded_response_maps() -> None:
    files = sorted((RECORDED / "restart_agent").rglob("*.json"))
    assert len(files) > 90
    for path in files:
        response = json.loads(path.read_text())
        verdict = outputs.restart_agent_verdict(response)
        rank = (response.get("primary_failure") or {}).get("rank")
        assert verdict.primary_ranks == ([int(rank)] if rank is not None else []), path.name
        assert not set(verdict.primary_ranks) & set(verdict.secondary_ranks), path.name
        if response["primary_failure"] is None:
            assert verdict.fault_category == "none", path.name


@needs_recorded
def test_hang_and_hardware_classes() -> None:
    hang = outputs.restart_agent_verdict(recorded("restart_agent/real_logs/gh_17.json"))
    assert (hang.fault_category, hang.primary_ranks, hang.secondary_ranks) == ("hang", [13], [15])
    assert outputs.restart_agent_verdict(recorded("restart_agent/real_logs/gh_22.json")).fault_type == "GPU_ERROR"


def test_last_json_line_is_the_response_and_garbage_is_refused() -> None:
    line = json.dumps({"schema_version": nvrx.RESTART_AGENT_SCHEMA, "decision": "STOP", "primary_failure": None})
    response = outputs.last_json_object(f"some log line\n{line}\n")
    assert outputs.restart_agent_verdict(response).restart == "STOP - DONT RESTART IMMEDIATE"
    with pytest.raises(outputs.NvrxOutputError, match="not JSON"):
        outputs.last_json_object("Traceback ...\nKeyError: 'x'\n")
    with pytest.raises(outputs.NvrxOutputError, match="schema_version"):
        outputs.restart_agent_verdict({"decision": "RESTART"})


def test_nvrx_logsage_printout_both_forms() -> None:
    text = "RESTART IMMEDIATE\nrank 3 hung\nAttribution: Primary issues: [3], Secondary issues: [0, 3, 5]\n\ncheckpoint_saved: true"
    verdict = outputs.logsage_verdict(text)
    assert (verdict.restart, verdict.primary_ranks, verdict.secondary_ranks) == (RESTART, [3], [0, 5])
    assert verdict.checkpoint_saved is True and verdict.fault_category is None and verdict.mode == nvrx.LOGSAGE
    repr_form = (
        "LogSageAnalysisResult(items=[RawAnalysisResultItem(raw_text='STOP - DONT RESTART IMMEDIATE', "
        "auto_resume='STOP - DONT RESTART IMMEDIATE', checkpoint_saved_flag=0, action='STOP', "
        "primary_issues=[1], secondary_issues=[0, 2])])"
    )
    parsed = outputs.logsage_verdict(repr_form)
    assert (parsed.restart, parsed.primary_ranks, parsed.secondary_ranks) == (STOP, [1], [0, 2])
    assert parsed.checkpoint_saved is False
    with pytest.raises(outputs.NvrxOutputError, match="no decision"):
        outputs.logsage_verdict("Traceback: ImportError: langchain_openai")


def test_combined_log_fr_answer() -> None:
    output = (
        "INFO:nvidia_resiliency_ext.attribution.log_analyzer.nvrx_logsage:RESTART IMMEDIATE\n"
        "INFO:nvidia_resiliency_ext.attribution.combined_log_fr.combined_log_fr:attribution_result: "
        "Summary of the log result: a peer died\n- List of ranks to be excluded: 9,14\n"
        "- Proposed Solution with Ranks: exclude 9 and 14\n"
        "INFO:nvidia_resiliency_ext.attribution.combined_log_fr.combined_log_fr:excluded_ranks: [9, 14]\n"
    )
    verdict = outputs.combined_verdict(output)
    assert (verdict.restart, verdict.primary_ranks) == (RESTART, [9, 14])  # its log side's decision
    assert "excluded_ranks" not in verdict.explanation and verdict.mode == nvrx.COMBINED
    with pytest.raises(outputs.NvrxOutputError, match="no attribution_result"):
        outputs.combined_verdict("INFO:x:input_data: ...\n")


def test_dumps_beside_a_cells_stripped_log(tmp_path: Path) -> None:
    assert tools.dumps_beside(tmp_path / "n1_X_r0_i5" / "analysis" / "main_workload.log") == (
        tmp_path / "n1_X_r0_i5" / "checkpoints"
    )
    assert tools.dumps_beside(tmp_path / "corpus" / "nc_01.log") is None


# ---- fr_attribution's table -----------------------------------------------------------------------


@needs_recorded
@pytest.mark.parametrize(("case", "suspects"), [("gpu_error_2nd", [9, 14]), ("lock_gil_1st", [9, 14])])
def test_fr_attribution_table_names_the_missing_ranks(case: str, suspects: list[int]) -> None:
    rows = outputs.fr_rows((RECORDED / "fr_attribution" / f"{case}.out").read_text())
    assert outputs.fr_suspects(rows) == suspects
    assert {"pg_id": "72", "pg_desc": "EXPERT_MODEL_PARALLEL_GROUP,0", "missing_ranks": [9, 14]}.items() <= next(
        r for r in rows if r["pg_id"] == "72"
    ).items()


@needs_recorded
def test_fr_attribution_synthetic_and_crash() -> None:
    synth = outputs.fr_rows((RECORDED / "fr_attribution" / "synth_64ranks_hung21.out").read_text())
    assert outputs.fr_suspects(synth) == [21]
    assert outputs.fr_rows((RECORDED / "fr_attribution" / "gloo_n2_SIGKILL_r1_i5.out").read_text()) == []


# ---- configuration ----------------------------------------------------------------------------


@pytest.fixture
def no_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(nvrx.SRC_ENV, raising=False)
    monkeypatch.delenv(nvrx.PYTHON_ENV, raising=False)


@pytest.mark.usefixtures("no_checkout")
@pytest.mark.parametrize("kind", [nvrx.RESTART_AGENT, nvrx.LOGSAGE])
def test_log_kinds_without_a_checkout_are_refused_in_one_line(kind: str) -> None:
    with pytest.raises(ConfigError) as error:
        registry.resolve(kind, BASE)
    assert str(error.value).count("\n") == 0
    assert "set nvrx.src (or NVRX_SRC) to its src/ folder" in str(error.value)


@pytest.mark.usefixtures("no_checkout")
def test_fr_kind_without_a_checkout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"fr_analyzers\.nvrx_fr.*set nvrx\.src"):
        registry.spec_from_config(Input.DUMPS, "nvrx_fr", None, BASE)


def test_a_folder_that_is_no_checkout_is_refused(tmp_path: Path) -> None:
    config = {**BASE, "nvrx": {"src": str(tmp_path), "python": ""}}
    with pytest.raises(ConfigError, match="is not an NVRx checkout's src/"):
        registry.resolve(nvrx.RESTART_AGENT, config)


def fake_checkout(root: Path, modules: dict[str, str]) -> Path:
    """A stand-in NVRx checkout: each module a small script."""
    src = root / "src"
    for dotted, body in modules.items():
        path = src / Path(*dotted.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (src / nvrx.PACKAGE / "attribution").mkdir(parents=True, exist_ok=True)
    return src


@pytest.mark.parametrize("kind", [nvrx.LOGSAGE, nvrx.COMBINED])
def test_llm_kind_without_endpoint_is_refused(tmp_path: Path, kind: str) -> None:
    config = {**BASE, "nvrx": {"src": str(fake_checkout(tmp_path, {})), "python": sys.executable}}
    with pytest.raises(ConfigError) as error:
        registry.resolve(kind, config)
    assert "needs an LLM endpoint: set llm.base_url and llm.model" in str(error.value)
    assert "\n" not in str(error.value)
    ra = registry.resolve(nvrx.RESTART_AGENT, config)  # the Restart Agent runs without one
    assert ra.spec.settings["llm"] == {} and ra.spec.settings["nvrx"]["python"] == sys.executable


# ---- the run path, through a stand-in checkout -----------------------------------------------------

FAKE_RESTART_AGENT = """
import json, os, sys
if not os.path.isabs(sys.argv[1]):
    sys.exit("ValueError: log_path must be absolute")  # as the real agent refuses one
if os.environ.get("FAKE_FAIL"):
    sys.stderr.write("Traceback (most recent call last):\\nKeyError: '0'\\n")
    sys.exit(1)
print("L0A ready", file=sys.stderr)
print(json.dumps(json.load(open(os.environ["FAKE_RESPONSE"]))))
"""
# Reads every file as NVRx's fr_attribution does (plain pickle.load), prints its table.
FAKE_FR = """
import glob, os, pickle, sys
folder = sys.argv[sys.argv.index("--fr-path") + 1]
ranks = []
for path in sorted(glob.glob(os.path.join(folder, "_dump_*"))):
    with open(path, "rb") as handle:
        pickle.load(handle)
    ranks.append(int(path.rsplit("_", 1)[1]))
print("PGID   | Process Group Desc        | Op Type    | Size | Dtype    | Missing Ranks")
print(f"0      | default_pg,0              | nccl:all_reduce | 4 | Float | {max(ranks) + 1}")
"""


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    src = fake_checkout(
        tmp_path / "nvrx", {nvrx.MODULES[nvrx.RESTART_AGENT]: FAKE_RESTART_AGENT, nvrx.MODULES[nvrx.FR]: FAKE_FR}
    )
    monkeypatch.setenv(nvrx.SRC_ENV, str(src))
    monkeypatch.setenv(nvrx.PYTHON_ENV, sys.executable)
    return src


@needs_recorded
def test_restart_agent_runs_from_the_checkout_on_a_neutral_path(checkout: Path, tmp_path: Path) -> None:
    os.environ["FAKE_RESPONSE"] = str(RECORDED / "restart_agent/cpu_cells/n2_SIGKILL_r1_i5.json")
    try:
        analyzer = registry.resolve(nvrx.RESTART_AGENT, BASE)
        log = tmp_path / "n2_SIGKILL_r1_i5" / "main.log"
        log.parent.mkdir()
        log.write_text("0: [rank0]: RuntimeError: boom\n")
        os.chdir(tmp_path)  # the workflow stages logs under a relative session folder
        outcome = analyzer.attempt(Path("n2_SIGKILL_r1_i5/main.log"), staging=Path("staging"))
        assert isinstance(outcome.verdict, LogVerdict), outcome.error
        assert outcome.verdict.primary_ranks == [0] and outcome.verdict.mode == nvrx.RESTART_AGENT
        assert outcome.raw is not None and '"restart_agent_response.v1"' in outcome.raw
        os.environ["FAKE_FAIL"] = "1"
        failed = analyzer.attempt(log, staging=Path("staging"))
        assert failed.verdict is None and failed.error == "exited with status 1"
        assert "KeyError: '0'" in failed.stderr_tail
    finally:
        os.chdir(REPO)
        os.environ.pop("FAKE_RESPONSE", None)
        os.environ.pop("FAKE_FAIL", None)


def test_checkout_edit_changes_the_fingerprint(checkout: Path) -> None:
    before = registry.resolve(nvrx.RESTART_AGENT, BASE).spec.fingerprint
    (checkout / nvrx.PACKAGE / "attribution" / "patch.py").write_text("X = 1\n")
    assert registry.resolve(nvrx.RESTART_AGENT, BASE).spec.fingerprint != before


class _Exploit:
    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.sentinel}",)


def nvrx_fr_attempt(dumps: Path, world_size: int) -> Outcome:
    spec = registry.spec_from_config(Input.DUMPS, "nvrx_fr", None, BASE)
    return registry.attempt(spec, DumpsSource(str(dumps), world_size, 4, 32))


@needs_nvrx_dumps
def test_nvrx_fr_never_sees_an_original_dump(checkout: Path, tmp_path: Path) -> None:
    dumps = tmp_path / "checkpoints"
    shutil.copytree(NVRX_FR / "gpu_error_2nd", dumps)
    sentinel = tmp_path / "pwned"
    (dumps / "_dump_3").write_bytes(pickle.dumps({"version": "2.9", "entries": [_Exploit(sentinel)]}))
    outcome = nvrx_fr_attempt(dumps, 16)
    assert not sentinel.exists()
    assert isinstance(outcome.verdict, FrVerdict), outcome.error
    assert [s.file.rsplit("/", 1)[1] for s in outcome.verdict.skipped_files] == ["_dump_3"]
    assert outcome.verdict.dumps_read == [r for r in range(16) if r != 3]
    assert outcome.verdict.suspect_ranks == [16]  # the stand-in's table, parsed
    assert outcome.verdict.tool == nvrx.FR and outcome.verdict.details["missing_ranks"][0]["missing_ranks"] == [16]


def test_nvrx_fr_with_only_a_malicious_dump_is_a_recorded_failure(checkout: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    dumps = tmp_path / "checkpoints"
    dumps.mkdir()
    (dumps / "_dump_0").write_bytes(pickle.dumps({"entries": [_Exploit(sentinel)]}))
    outcome = nvrx_fr_attempt(dumps, 4)
    assert not sentinel.exists()
    assert outcome.verdict is None and outcome.error == "no dump fr_attribution may read (1 unsafe or unreadable)"
    assert "refused global" in outcome.stderr_tail


def test_nvrx_fr_without_dumps(checkout: Path, tmp_path: Path) -> None:
    outcome = nvrx_fr_attempt(tmp_path, 8)
    assert isinstance(outcome.verdict, FrVerdict) and outcome.verdict.no_dumps is True
    assert outcome.verdict.ranks_without_dump == list(range(8))


def test_the_restart_agents_policy_is_kept_in_its_score() -> None:
    response = {
        "schema_version": nvrx.RESTART_AGENT_SCHEMA,
        "decision": "RESTART",
        "primary_failure": {"rank": "1", "failure_class": "framework_crash", "root_fingerprint": "sigkill"},
        "retry_policy": {"rule": "general_retry", "policy_version": "retry_budget.v1"},
        "decision_basis": "general_retry_available",
    }
    cell = Cell("SIGKILL", 1, 5, 1)
    score = score_cell(Truth(cell), cell_manifest(cell), outputs.restart_agent_verdict(response), None)
    assert score.restart_policy == "retry_budget.v1 general_retry (general_retry_available)"
    assert score.grade("restart_correct") == Grade.FALSE  # the table says STOP: still a miss
    assert score.grade("fault_type_correct") == Grade.TRUE
