"""run_job's settings are declared once (JobSettings); the config schema, config.yaml, the rule's
flags and every command line agree with that declaration."""

from __future__ import annotations

import argparse
import dataclasses
import shlex

import yaml

from conftest import REPO
from faultloop.cli.options import add_settings, settings_from
from faultloop.plan.config import CONFIG_SCHEMA
from faultloop.run.spec import CONFIG_SETTINGS, RANK_SETTINGS, JobSettings, JobSpec, rule_flags

CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_the_schema_states_every_config_setting_and_config_yaml_gives_the_defaults() -> None:
    schema = yaml.safe_load(CONFIG_SCHEMA.read_text())["properties"]["run_job"]["properties"]
    defaults = JobSettings()
    for name in CONFIG_SETTINGS:
        assert name in schema, f"run_job.{name} is a JobSettings field the config schema does not state"
        assert CONFIG["run_job"][name] == getattr(defaults, name), f"config.yaml's run_job.{name}"
    launcher = next(f for f in dataclasses.fields(JobSettings) if f.name == "launcher")
    assert schema["launcher"]["enum"] == list(launcher.metadata["choices"])


def test_the_rule_flags_parse_back_to_the_settings() -> None:
    parser = argparse.ArgumentParser()
    add_settings(parser, JobSettings)
    args = parser.parse_args(rule_flags(CONFIG["run_job"]))
    assert settings_from(args, JobSettings) == JobSettings()
    assert shlex.join(rule_flags({"iterations": 12, "launcher": "srun", "cleanup_cmd": "x"})) == (
        "--launcher srun --iterations 12"
    )


def test_the_rank_gets_its_settings_and_the_rendezvous_timeout(tmp_path) -> None:
    spec = JobSpec(tmp_path, "SIGKILL", 1, 5, 2, 4, settings=JobSettings(iterations=12))
    parser = argparse.ArgumentParser()
    add_settings(parser, JobSettings, only=RANK_SETTINGS)
    rank = settings_from(parser.parse_args(spec.rank_argv()), JobSettings, only=RANK_SETTINGS)
    assert rank.iterations == 12 and rank.init_timeout_s == 60.0 + 3.0 * 8
