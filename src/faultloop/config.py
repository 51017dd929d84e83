"""Configuration: tracked defaults, the untracked site file, command-line overrides, the pool.

Precedence (lowest first): config/config.yaml, the site file (config/site.yaml), ``--config``.
The site file keeps cluster and credential settings out of git, like upstream's user.env.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from faultloop import layout
from faultloop.pool import Cell, PoolError, load_pool


class ConfigError(ValueError):
    """A configuration problem, naming the file or key."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge nested mappings; values in override win."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_site_file(path: str | Path) -> dict[str, Any]:
    """Read the untracked site file; a missing file is an empty site."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of config keys, got {type(data).__name__}")
    return data


# Keys holding named entries that `--config key=a,b` selects from instead of replacing.
SELECTABLE = ("analyzers", "fr_analyzers")


def resolve(config: Mapping[str, Any], overrides: Mapping[str, Any],
            config_files: Iterable[str | Path] = ()) -> dict[str, Any]:
    """Apply the site file under the command-line overrides.

    `--config analyzers=mine,builtin` (a name or a list) limits an invocation to those entries
    of `analyzers` (likewise `fr_analyzers`), in that order, as config_files and the site file
    define them; a name without an entry stands for the kind of that name.
    """
    site_file = overrides.get("site_file", config.get("site_file", "config/site.yaml"))
    site = load_site_file(site_file)
    merged = deep_merge(deep_merge(config, site), overrides)
    for key in SELECTABLE:
        choice = overrides.get(key)
        if not isinstance(choice, (str, list)):
            continue
        defined = dict(config[key]) if isinstance(config.get(key), Mapping) else {}
        for path in config_files:
            defined = deep_merge(defined, (yaml.safe_load(Path(path).read_text()) or {}).get(key) or {})
        defined = deep_merge(defined, site.get(key) or {})
        names = choice.replace(",", " ").split() if isinstance(choice, str) else [str(n) for n in choice]
        merged[key] = {name: defined.get(name) or {"kind": name} for name in names}
    return merged


def load(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as the workflow resolves it, for commands run from the repository root."""
    base = yaml.safe_load(Path("config/config.yaml").read_text())
    return resolve(base, overrides)


@dataclass(frozen=True)
class Workload:
    """A registered workload: what run_job launches and the smallest job it supports."""

    name: str
    script: str
    min_nodes: int
    description: str
    pool_file: str

    @property
    def builtin(self) -> bool:
        return self.script == "builtin"


def workload(config: Mapping[str, Any]) -> Workload:
    name = config["workload"]
    registry = config.get("workloads", {})
    if name not in registry:
        raise ConfigError(f"config key 'workload': unknown workload {name!r} (registered: {', '.join(registry)})")
    entry = registry[name]
    return Workload(name, entry["script"], int(entry.get("min_nodes", 1)), entry.get("description", ""), entry.get("pool_file", ""))


def pool_cells(config: Mapping[str, Any]) -> list[Cell]:
    """The validated pool, in priority order (raises PoolError naming every bad row)."""
    spec = workload(config)
    pool_file = config.get("pool_file") or spec.pool_file
    return load_pool(
        pool_file=pool_file,
        pool_spec=config.get("pool") or None,
        gpus_per_node=int(config["gpus_per_node"]),
        min_nodes=spec.min_nodes,
        workload=spec.name,
    )


def selected_cells(config: Mapping[str, Any], cells: list[Cell]) -> list[Cell]:
    """Apply the `cells` key: all, failed (the first analyzer's failing cells in the last report's
    scores), or named cells."""
    choice = str(config.get("cells", "all")).strip()
    if choice in ("", "all"):
        return cells
    if choice == "failed":
        from faultloop.report import failing_cells

        scores = layout.session_dir(config) / layout.SCORES_TSV
        if not scores.is_file():
            raise ConfigError(f"config key 'cells': 'failed' needs a previous report, and {scores} does not exist")
        primary = next((name for name, entry in (config.get("analyzers") or {}).items() if entry is not None), None)
        failing = {c.name for c in failing_cells(scores, analyzer=primary)}
        return [c for c in cells if c.name in failing]
    wanted = choice.replace(",", " ").split()
    known = {c.name for c in cells}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(f"config key 'cells': not in the pool: {', '.join(unknown)}")
    return [c for c in cells if c.name in set(wanted)]


def source_fingerprint(*objects: Any, settings: Any = None) -> str:
    """Short hash of the source of modules/functions plus settings.

    Snakemake does not notice edits to imported modules; rules put this in their params so
    that patching the analyzer re-runs the analysis (and only the analysis).
    """
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(inspect.getsource(obj).encode())
    digest.update(repr(settings).encode())
    return digest.hexdigest()[:12]


__all__ = [
    "ConfigError",
    "PoolError",
    "Workload",
    "deep_merge",
    "load",
    "load_site_file",
    "pool_cells",
    "resolve",
    "selected_cells",
    "source_fingerprint",
    "workload",
]


def main(argv: list[str]) -> int:
    """`faultloop where [key=value ...]`: print the session folder and report of a configuration."""
    from faultloop.workflow import parse_overrides

    resolved = load(parse_overrides(argv))
    session = layout.session_dir(resolved)
    print(f"session: {session.resolve()}")
    print(f"report: {(session / layout.REPORT_MD).resolve()}")
    return 0
