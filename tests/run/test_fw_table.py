"""The framework table: every row startable and consistent with the fault table, and each refusal
planning shows (an unsupported launcher, a fault the framework cannot host, a framework not
installed, a framework that needs a GPU on a machine without one) one clear line."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from faultloop import frameworks
from faultloop.faults import FAULTS
from faultloop.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS


def test_every_row_names_a_rank_module_real_faults_and_a_default_launcher():
    assert DEFAULT_FRAMEWORK in FRAMEWORKS
    for name, row in FRAMEWORKS.items():
        assert row.name == name
        assert importlib.util.find_spec(row.module) is not None, row.module
        assert row.launchers, name
        assert set(row.refuses) <= set(FAULTS), name


def test_a_launcher_the_workload_does_not_support_is_refused_with_the_ones_it_does():
    why = FRAMEWORKS["ray_train"].refusal("SIGKILL", "torchrun")
    assert why == "workload ray_train does not run under launcher 'torchrun' (it supports ray)"


def test_a_fault_the_framework_cannot_host_is_refused_with_the_reason():
    why = FRAMEWORKS["hf_trainer"].refusal("NAN_LOSS", "torchrun")
    assert why is not None and why.startswith(
        "workload hf_trainer cannot host fault NAN_LOSS: the framework has no NaN"
    )
    assert FRAMEWORKS["lightning"].refusal("NAN_LOSS", "torchrun") is None  # Lightning's detect_anomaly fails on it


def test_a_framework_that_is_not_installed_is_refused_with_how_to_install_it():
    row = dataclasses.replace(FRAMEWORKS["lightning"], requires=("lightning", "faultloop_no_such_framework"))
    assert row.missing() == ["faultloop_no_such_framework"]
    why = row.refusal("SIGKILL", "torchrun")
    assert why == (
        "workload lightning needs faultloop_no_such_framework, not installed: "
        "pip install -e '.[frameworks]' (make setup installs it)"
    )


def test_a_framework_that_fails_on_cpu_is_refused_where_no_gpu_is(monkeypatch, tmp_path):
    monkeypatch.setattr(frameworks, "NVIDIA_DEVICE", tmp_path / "nvidia0")
    why = FRAMEWORKS["megatron_core"].refusal("SIGKILL", "torchrun")
    assert why is not None and why.startswith("workload megatron_core needs a GPU, and this machine has none")
    assert "Torch not compiled with CUDA enabled" in why
    (tmp_path / "nvidia0").touch()
    assert FRAMEWORKS["megatron_core"].refusal("SIGKILL", "torchrun") is None


@pytest.mark.parametrize("name", sorted(set(FRAMEWORKS) - {DEFAULT_FRAMEWORK}))
def test_each_framework_is_installed_by_the_projects_setup(name):
    assert FRAMEWORKS[name].missing() == []
