"""The message catalog: every template a program prints is classified as the catalog says."""

from __future__ import annotations

import random

import pytest

from faultloop.analyze import logsage
from faultloop.analyze.logsage import messages
from faultloop.faults import CATEGORIES
from paste_styles import INNER_FAMILIES, OUTER_FAMILIES, behind

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
    "Ray",
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


RENDERINGS_PER_TEMPLATE = 3  # the generated test's size: templates x renderings (benchmarks/README.md)


def _render(template: messages.Template, rnd: random.Random) -> list[str]:
    """The template with random values, behind one or two random prefix families."""
    values = dict(messages.SAMPLE_VALUES)
    values.update(
        rank=str(rnd.randrange(64)),
        local=str(rnd.randrange(8)),
        dev=str(rnd.randrange(8)),
        pid=str(rnd.randrange(1000, 4_000_000)),
        tid=str(rnd.randrange(1000, 4_000_000)),
        host=f"node{rnd.randrange(1000):03d}",
        port=str(rnd.randrange(20000, 30000)),
        job=str(rnd.randrange(10**5, 10**7)),
        n=str(rnd.randrange(2, 1000)),
        ms=str(rnd.randrange(1000, 10**7)),
    )
    lines = template.template.format(**values).split("\\n")
    outer = rnd.choice([None, *OUTER_FAMILIES.values()])
    inner = rnd.choice([None, *INNER_FAMILIES.values()]) if outer else rnd.choice(list(INNER_FAMILIES.values()))
    return behind(outer, inner)(lines)


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.where for t in TEMPLATES])
def test_every_template_keeps_its_category_with_random_values_behind_random_prefixes(
    template: messages.Template,
) -> None:
    """Generated: each template rendered with random values behind random prefix families
    (seeded by its place in the catalog, so a failure reproduces)."""
    rnd = random.Random(template.where)
    for _ in range(RENDERINGS_PER_TEMPLATE):
        lines = _render(template, rnd)
        v = logsage.analyze_log(lines, logsage.Settings(prefilter="python"))
        assert v.fault_category == template.category, (lines, v.detail)
