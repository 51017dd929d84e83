"""What the Snakemake workflow catalog reads holds: the main workflow at workflow/Snakefile, its
usage file's flags plan the workflow, every parameter of the config schema is described there
and documented in config/README.md."""

from __future__ import annotations

import re

import yaml

from conftest import REPO, planned, snakemake


def test_the_catalogs_usage_flags_plan_the_workflow(workflow_copy):
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert usage["software-stack-deployment"]["conda"] is True
    assert (REPO / "workflow" / "envs" / "faultloop.yaml").is_file()
    assert (REPO / "workflow" / "Snakefile").is_file() and not (REPO / "Snakefile").exists()
    flags = usage["mandatory-flags"]["flags"].split()
    result = snakemake(workflow_copy, "-n", *flags, "--config", "pool=SIGKILL:1:5:2")
    assert planned(result.stdout + result.stderr)["run_job"] == 1


def test_every_parameter_is_described_in_the_schema_and_documented():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    readme = (REPO / "config" / "README.md").read_text()
    undescribed = [key for key, spec in schema["properties"].items() if not spec.get("description")]
    assert undescribed == []
    undocumented = [key for key in schema["properties"] if not re.search(rf"^\| `{key}[`.]", readme, re.M)]
    assert undocumented == []


def test_the_readme_names_what_the_catalog_looks_for():
    text = (REPO / "README.md").read_text().lower()
    assert "snakemake" in text and "workflow" in text
    assert "## running the workflow" in (REPO / "config" / "README.md").read_text().lower()
