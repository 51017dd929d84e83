"""The message catalog: every template a program prints is classified as the catalog says."""

from __future__ import annotations

import pytest

from faultloop.analyze import logsage
from faultloop.analyze.logsage import messages
from faultloop.faults import CATEGORIES

TEMPLATES = messages.load_catalog()
PROGRAMS = {
    "torch",
    "gloo",
    "CUDA runtime",
    "NVML",
    "NVIDIA driver",
    "NCCL",
    "SLURM",
    "Open MPI",
    "Horovod",
    "DeepSpeed",
    "accelerate",
    "Lightning",
    "CPython",
    "Linux",
}


def test_the_catalog_covers_the_programs_behind_training_logs() -> None:
    assert PROGRAMS <= {t.program for t in TEMPLATES}
    assert all(t.category in CATEGORIES for t in TEMPLATES)
    cuda_errors = [t for t in TEMPLATES if t.program == "CUDA runtime"]
    assert len(cuda_errors) >= 60, "the cudaGetErrorString list"


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.where for t in TEMPLATES])
def test_every_template_alone_leads_to_its_verdict(template: messages.Template) -> None:
    """A template pasted on its own (the common excerpt) is classified as the catalog says."""
    v = logsage.analyze_log(template.example(), logsage.Settings(prefilter="python"))
    assert (v.fault_category, v.restart) == (template.category, template.restart), (template.template, v.detail)
