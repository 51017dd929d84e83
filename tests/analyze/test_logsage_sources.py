"""The catalog's coverage generator: templates read from call sites in C++, C and Python, turned into
regexes and set against catalog rows. The snippets are written here in the programs' styles."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from faultloop.analyze.logsage import messages, sources
from faultloop.cli import catalog_gaps

CPP = """
void Store::check(int n) {
  TORCH_CHECK(n > 0, "Timed out after ", n, " seconds waiting for clients. ",
              joined, "/", n, " clients joined.");
  // TORCH_CHECK(false, "a comment is no message");
  C10_THROW_ERROR(DistNetworkError, "Failed to recv, got 0 bytes. "
                  "Connection was likely closed.");
  LOG(ERROR) << logPrefix() << "Heartbeat monitor timed out! Size=" << size << ".";
  C10D_WARNING("Socket {} closed with {{braces}} kept", fd);
  TORCH_CHECK(ok, "short");
}
"""

PYTHON = """
def _close(self, death_sig, timeout):
    logger.warning("Sending process %s closing signal %s", pid, death_sig.name)
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
    raise RendezvousTimeoutError(
        "The node did not join the rendezvous " + str(self._name) + " in time."
    )
    assert not norm.isnan(), (
        f"Rank {rank}: found NaN in local grad norm. Device: {dev}, node: {host}"
    )
    assert ok
    x = a // b  # a floor division is no comment
    raise ValueError(f"{{literal}} braces and a value {x!r} in an f-string")
"""

NCCL = """
static ncclResult_t socketProgress(int op, struct ncclSocket* sock) {
  if (bytes == 0) {
    WARN("Net : Connection closed by remote peer %s", ncclSocketToString(&sock->addr, line, 0));
    return ncclRemoteError;
  }
  WARN("Net : Call to recv from %s failed : %s", addr, strerror(errno));
  WARN("socketProgressOpt: Call to %s %s failed : %s", op == RECV ? "recv from" : "send to", addr, err);
  INFO(NCCL_NET, "an INFO line is not a warning");
  WARN("Message truncated : received %" PRIu64 " bytes instead of %d", got, size);
}
"""


def texts(path: str, text: str, program: str) -> list[str]:
    return [t.text for t in sources.extract(path, text, sources.SCOPES[program])]


def test_cpp_call_sites_give_their_literals_with_a_value_between_them() -> None:
    found = texts("torch/csrc/distributed/c10d/TCPStore.cpp", CPP, "torch")
    assert found == [
        "Timed out after {} seconds waiting for clients. {}/{} clients joined.",
        "Failed to recv, got 0 bytes. Connection was likely closed.",
        "Socket {} closed with {braces} kept",
        "Heartbeat monitor timed out! Size={}.",
    ]


def test_python_raises_logger_calls_and_asserts_give_their_messages() -> None:
    scope = sources.Scope(("*.py",), (*sources.SCOPES["torch"].emitters, sources.PY_ASSERT))
    found = [t.text for t in sources.extract("api.py", PYTHON, scope)]
    assert found == [
        "Process {} got signal:",  # a trailing value adds nothing to search with
        "The node did not join the rendezvous {} in time.",
        "{literal} braces and a value {} in an f-string",
        "Sending process {} closing signal",
        "Rank {}: found NaN in local grad norm. Device: {}, node:",
    ]


def test_nccl_warnings_are_printf_formats_and_info_lines_are_not_read() -> None:
    assert texts("src/misc/socket.cc", NCCL, "NCCL") == [
        "Net : Connection closed by remote peer",
        "Net : Call to recv from {} failed :",
        "socketProgressOpt: Call to {} {} failed :",  # a conditional's literals are one value
        "Message truncated : received {} bytes instead of",
    ]


def test_a_line_shows_a_template_when_it_holds_its_words_in_order() -> None:
    template = sources.SourceTemplate("Timed out after {} seconds waiting for clients.", "f", 1, "x", sources.REPORT)
    anchor = template.anchor()
    assert anchor == ("Timed out after ", " seconds waiting for clients.")
    assert sources.shows(anchor, "DistStoreError: Timed out after 600 seconds  waiting for clients. 1/2")
    assert not sources.shows(anchor, "seconds waiting for clients. Timed out after 600")
    too_short = sources.SourceTemplate("{} failed: {}", "f", 1, "x", sources.REPORT)
    assert too_short.anchor() is None


def test_matching_a_long_line_with_many_values_takes_linear_time() -> None:
    """A regex of many wildcards backtracks on a line that nearly matches; the in-order find does not."""
    anchor = sources.SourceTemplate("a {} " * 40 + "end of the message", "f", 1, "x", sources.REPORT).anchor()
    assert anchor is not None
    assert not sources.shows(anchor, "a " * 100_000)


def _row(template: str, source: str = "src/misc/socket.cc", program: str = "NCCL") -> messages.Template:
    return messages.Template(program, source, "unchecked", template, "m", "network", "RESTART", f"t.tsv:{template}")


def test_coverage_lists_uncovered_templates_and_rows_the_release_does_not_print() -> None:
    reading = sources.Reading(
        list(sources.extract("src/misc/socket.cc", NCCL, sources.SCOPES["NCCL"])),
        frozenset({"src/misc/socket.cc"}),
        NCCL,
    )
    shown = _row("{host}:{pid}:{tid} [{dev}] NCCL WARN Net : Connection closed by remote peer {host}<{port}>")
    renamed = _row("{host}:{pid}:{tid} [{dev}] NCCL WARN socketProgress: Connection closed by remote peer {host}")
    unread = _row("NCCL WARN Cuda failure 'out of memory'", source="src/include/checks.h (CUDACHECK)")
    found = sources.coverage(reading, [shown, renamed, unread], "NCCL")
    assert [t.text for t, _ in found.covered] == ["Net : Connection closed by remote peer"]
    assert [t.text for t in found.uncovered] == [
        "Net : Call to recv from {} failed :",
        "socketProgressOpt: Call to {} {} failed :",
        "Message truncated : received {} bytes instead of",
    ]
    assert (found.rows_seen, found.rows_unseen, found.rows_unread) == ([shown], [renamed], [unread])


def test_a_compiled_release_is_read_from_its_strings(tmp_path: Path) -> None:
    strings = tmp_path / "libtorch.strings"
    strings.write_text("_ZN3c104impl\nSocket Timeout\nFailed to recv, got 0 bytes. Connection was likely closed.\n")
    reading = sources.read_templates("torch", strings=[strings])
    store = _row("torch.distributed.DistStoreError: Socket Timeout", "torch/csrc/distributed/c10d/socket.cpp", "torch")
    gone = _row("RuntimeError: Address already in use", "torch/csrc/distributed/c10d/socket.cpp", "torch")
    python = _row("Received {n} death signal, shutting down workers", "torch/distributed/elastic/api.py", "torch")
    found = sources.coverage(reading, [store, gone, python], "torch")
    assert (found.rows_seen, found.rows_unseen, found.rows_unread) == ([store], [gone], [python])
    assert found.uncovered == []  # a library's strings are no list of messages to cover


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_revision_of_a_git_repository_is_read_without_a_work_tree(tmp_path: Path) -> None:
    repo = tmp_path / "nccl"
    (repo / "src" / "misc").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "src" / "misc" / "socket.cc").write_text(NCCL)
    (repo / "src" / "enqueue.cc").write_text('WARN("Out of scope: enqueue is not a network file %s", x);')
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    _git(repo, "tag", "v1")
    (repo / "src" / "misc" / "socket.cc").write_text(NCCL.replace("Net : Connection", "socketProgress: Connection"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    old = sources.read_templates("NCCL", git_dir=repo / ".git", rev="v1")
    new = sources.read_templates("NCCL", git_dir=repo / ".git", rev="HEAD")
    assert old.paths == new.paths == {"src/misc/socket.cc"}
    assert "Net : Connection closed by remote peer" in [t.text for t in old.templates]
    assert "socketProgress: Connection closed by remote peer" in [t.text for t in new.templates]


def test_the_command_lists_gaps_and_refuses_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """One template the catalog shows and one no program prints (so no row can cover it)."""
    (tmp_path / "src" / "misc").mkdir(parents=True)
    (tmp_path / "src" / "misc" / "socket.cc").write_text(
        'WARN("Net : Connection closed by remote peer %s", addr);\n'
        'WARN("Invented : no release prints this warning about %s", what);\n'
    )
    assert catalog_gaps.main(["NCCL", "--source", str(tmp_path), "--verdicts"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# NCCL at {tmp_path}: 2 templates, 1 covered, 0 reviewed, 1 left;")
    assert (
        "src/misc/socket.cc:2\tWARN\treport\t'Invented : no release prints this warning about'\tnone/ERRORS NOT FOUND"
        in out
    )
    assert catalog_gaps.main(["NCCL", "--source", str(tmp_path / "absent")]) == 2
    assert "no such path" in capsys.readouterr().err


def test_reviewed_templates_are_counted_apart_from_those_left(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A reviewed template is neither covered nor left; one the list does not name stays left."""
    (tmp_path / "src" / "misc").mkdir(parents=True)
    (tmp_path / "src" / "misc" / "socket.cc").write_text(
        'WARN("Net : Connection closed by remote peer %s", addr);\n'
        'WARN("ncclSocketSend: pass NULL socket");\n'
        'WARN("Bad value of NCCL_INVENTED_SETTING: %s\\nusing the default", value);\n'
        'WARN("Invented : no release prints this warning about %s", what);\n'
    )
    reviewed = tmp_path / "reviewed.tsv"
    reviewed.write_text(
        "program\ttemplate\treason\n"
        "NCCL\tncclSocketSend: pass NULL socket\tapi_misuse\n"
        "NCCL\tBad value of NCCL_INVENTED_SETTING: {}\\nusing the default\tconfiguration\n"
        "torch\tInvented : no release prints this warning about\tinfo\n"  # another program's list
    )
    assert sources.load_reviewed(reviewed) == {
        ("NCCL", "ncclSocketSend: pass NULL socket"),
        ("NCCL", "Bad value of NCCL_INVENTED_SETTING: {}\nusing the default"),
        ("torch", "Invented : no release prints this warning about"),
    }
    assert catalog_gaps.main(["NCCL", "--source", str(tmp_path), "--reviewed", str(reviewed)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# NCCL at {tmp_path}: 4 templates, 1 covered, 2 reviewed, 1 left;")
    assert "src/misc/socket.cc:4\tWARN\treport\t'Invented : no release prints this warning about'" in out
    assert "pass NULL socket" not in out


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("program\ttemplate\n", "reviewed.tsv: columns must be program, template, reason"),
        ("program\ttemplate\treason\nNCCL\tsome template\tlooks harmless\n", "reviewed.tsv:2: every field"),
        ("program\ttemplate\treason\nNCCL\t\tinfo\n", "reviewed.tsv:2: every field"),
    ],
)
def test_the_reviewed_list_names_the_row_it_refuses(tmp_path: Path, text: str, error: str) -> None:
    reviewed = tmp_path / "reviewed.tsv"
    reviewed.write_text(text)
    with pytest.raises(ValueError, match=error):
        sources.load_reviewed(reviewed)


def test_the_shipped_reviewed_list_loads_and_names_no_covered_template() -> None:
    """Every reviewed template is one no catalog row shows (else the row, not the list, answers it)."""
    catalog = messages.load_catalog()
    for program, text in sources.load_reviewed():
        reading = sources.Reading(
            [sources.SourceTemplate(text, "reviewed.tsv", 1, "WARN", sources.REPORT)], frozenset(), ""
        )
        assert sources.coverage(reading, catalog, program).covered == [], text


@pytest.mark.parametrize(
    ("program", "path", "read"),
    [
        # DeepSpeed's launcher, comm, elasticity and engine; not its kernels or tests
        ("DeepSpeed", "deepspeed/launcher/launch.py", True),
        ("DeepSpeed", "deepspeed/runtime/engine.py", True),
        ("DeepSpeed", "deepspeed/runtime/fp16/loss_scaler.py", True),
        ("DeepSpeed", "deepspeed/ops/adam/fused_adam.py", False),
        ("DeepSpeed", "tests/unit/launcher/test_run.py", False),
        # Ray's exceptions and Train, from a checkout (python/ray/) or an installed package (ray/)
        ("Ray", "python/ray/exceptions.py", True),
        ("Ray", "ray/exceptions.py", True),
        ("Ray", "python/ray/train/v2/_internal/execution/worker_group/poll.py", True),
        ("Ray", "ray/train/_internal/backend_executor.py", True),
        ("Ray", "python/ray/data/dataset.py", False),
        ("Ray", "python/ray/train/tests/test_backend.py", False),
    ],
)
def test_deepspeed_and_ray_scopes_read_their_failure_paths(program: str, path: str, read: bool) -> None:
    assert sources.in_scope(path, sources.SCOPES[program]) == read


def test_deepspeed_and_ray_messages_are_their_python_raises_and_log_calls() -> None:
    launch = """
def sigkill_handler(signum, frame):
    for process in processes:
        logger.info(f"Killing subprocess {process.pid}")
    if last_return_code is not None:
        logger.error(f"{cmd} exits with return code = {last_return_code}")
    raise Exception("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
"""
    poll = """
        raise WorkerGroupError("Training failed due to worker errors:\\n" + "\\n".join(errors), worker_failures=f)
        logger.warning(f"Failure identified during training. Restarting all workers and continuing training.")
"""
    assert texts("deepspeed/launcher/launch.py", launch, "DeepSpeed") == [
        "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
        "exits with return code =",  # a value that leads or ends a message is no word of it
    ]
    assert texts("python/ray/train/v2/_internal/execution/worker_group/poll.py", poll, "Ray") == [
        "Training failed due to worker errors:",
        "Failure identified during training. Restarting all workers and continuing training.",
    ]
