"""Configuration: tracked defaults, the untracked site file, command-line overrides, the pool.

Precedence (lowest first): config/config.yaml, the site file (config/site.yaml), ``--config``.
The site file keeps cluster and credential settings out of git, like upstream's user.env.
What a valid configuration is, `workflow/schemas/config.schema.yaml` states, and only it: the workflow
checks the resolved configuration against it once, here (`resolve(..., check=True)`).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError
from faultloop.faults import FAULTS
from faultloop.frameworks import DEFAULT_FRAMEWORK
from faultloop.plan.pool import Refusal, load_pool

CONFIG_SCHEMA = layout.SCHEMAS / "config.schema.yaml"

# The workload script name of the built-in workload (faultloop.run.workload), whose iteration count
# is the config's run_job.iterations; a site workload's is its own.
BUILTIN = "builtin"


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


def resolve(
    config: Mapping[str, Any],
    overrides: Mapping[str, Any],
    config_files: Iterable[str | Path] = (),
    *,
    check: bool = False,
    analyzer_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Apply the site file under the command-line overrides.

    With `check`, the result is checked against the config schema: a key it does not know (a
    typo such as `gpus_per_nod`) or a value it refuses fails here, named with where it came from.
    `--config analyzers=mine,builtin` (a name or a list) limits an invocation to those entries
    of `analyzers` (likewise `fr_analyzers`), in that order, as config_files and the site file
    define them; a name without an entry stands for the kind of that name. analyzer_schema: the
    analyzer keys' schema as the table of kinds states it (`analyze.registry.config_schema`), in
    place of the file's (which a test holds equal to the built-in table).
    """
    site_file = overrides.get("site_file", config.get("site_file", "config/site.yaml"))
    site = load_site_file(site_file)
    # The base config already holds the --config values (Snakemake merged them): each problem is
    # named once, with the most specific place it was given.
    layers = (("--config", overrides), (str(site_file), site), ("config/config.yaml", config))
    schema = yaml.safe_load(CONFIG_SCHEMA.read_text()) if check else None
    if schema is not None:
        schema["properties"].update(analyzer_schema or {})
        seen: dict[str, str] = {}
        for where, layer in layers:
            for problem in unknown_keys(layer, schema):
                seen.setdefault(problem, where)
        problems = [f"{where}: {problem}" for problem, where in seen.items()]
        if problems:
            raise ConfigError("unknown configuration key(s):\n" + "\n".join(f"  - {p}" for p in problems))
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
    if schema is not None:
        invalid_values(merged, schema, layers)
    return merged


def invalid_values(config: Mapping[str, Any], schema: Mapping[str, Any], layers: Iterable[tuple[str, Any]]) -> None:
    """Raise one ConfigError naming every value the schema refuses, with the file that gave it."""
    layers = list(layers)
    problems = []
    for error in sorted(jsonschema.Draft202012Validator(schema).iter_errors(config), key=lambda e: list(e.path)):
        path = [str(p) for p in error.path]
        where = next((w for w, layer in layers if _holds(layer, path)), "config/config.yaml") if path else "config"
        key = ".".join(path) or "(top level)"
        problems.append(f"{where}: config key '{key}': {error.message}")
    if problems:
        raise ConfigError("invalid configuration value(s):\n" + "\n".join(f"  - {p}" for p in problems))


def _holds(layer: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(layer, Mapping) or part not in layer:
            return False
        layer = layer[part]
    return True


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """Snakemake-style ``key=value`` overrides (YAML values), as given to ``--config``."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"expected key=value, got {pair!r}")
        overrides[key] = yaml.safe_load(value) if value else ""
    return overrides


def load(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as the workflow resolves and checks it, for commands run from the
    repository root (a mistyped key fails here as it does in the workflow)."""
    base = yaml.safe_load(Path("config/config.yaml").read_text())
    return resolve(base, overrides, check=True)


def unknown_keys(
    config: Mapping[str, Any], schema: Mapping[str, Any], prefix: str = "", root: Mapping[str, Any] | None = None
) -> list[str]:
    """Keys the JSON schema does not declare, each with the nearest declared key (if any is close)."""
    root = root or schema
    schema = _resolve_ref(schema, root)
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    extra = schema.get("additionalProperties")
    problems = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if key in properties or isinstance(extra, Mapping):
            if isinstance(value, Mapping):
                problems += unknown_keys(value, properties.get(key, extra), f"{name}.", root)
        else:
            near = difflib.get_close_matches(str(key), list(properties), n=1, cutoff=0.6)
            hint = f"; did you mean '{prefix}{near[0]}'?" if near else f" (known: {', '.join(properties)})"
            problems.append(f"'{name}' is not a configuration key{hint}")
    return problems


def _resolve_ref(node: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow a local `$ref` (#/definitions/x) so nested sections are checked too."""
    if isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        return target
    return node if isinstance(node, Mapping) else {}


@dataclass(frozen=True)
class Workload:
    """A registered workload: what run_job launches and the smallest job it supports."""

    name: str
    script: str
    min_nodes: int
    description: str
    pool_file: str
    faults: tuple[str, ...] = ()  # faults beyond upstream's twelve that its script injects (a site workload)

    def injects(self) -> frozenset[str] | None:
        """The faults it can inject; None: every row of the fault table (the built-in workload)."""
        if self.script == BUILTIN:
            return None
        return frozenset(name for name, fault in FAULTS.items() if fault.upstream) | frozenset(self.faults)


def workload(config: Mapping[str, Any]) -> Workload:
    name = config["workload"]
    registry = config.get("workloads", {})
    if name not in registry:
        raise ConfigError(f"config key 'workload': unknown workload {name!r} (registered: {', '.join(registry)})")
    entry = registry[name]
    return Workload(
        name,
        entry["script"],
        int(entry.get("min_nodes", 1)),
        entry.get("description", ""),
        entry.get("pool_file", ""),
        tuple(entry.get("faults", ())),
    )


def pool_cells(config: Mapping[str, Any], refuse: Refusal | None = None) -> list[Cell]:
    """The validated pool, in priority order (raises PoolError naming every bad row). `refuse`:
    why a cell's workload or launcher cannot run it (faultloop.run.matrix), checked per row."""
    spec = workload(config)
    pool_file = config.get("pool_file") or spec.pool_file
    return load_pool(
        pool_file=pool_file,
        pool_spec=config.get("pool") or None,
        gpus_per_node=int(config["gpus_per_node"]),
        min_nodes=spec.min_nodes,
        workload=spec.name,
        iterations=int(config["run_job"]["iterations"]) if spec.script == BUILTIN else None,
        injects=spec.injects(),
        max_attempts=int(config["max_attempts"]),
        resumes=spec.script == BUILTIN,
        default_workload=session_workload(config),
        default_launcher=config["run_job"]["launcher"],
        refuse=refuse,
    )


def session_workload(config: Mapping[str, Any]) -> str:
    """The workload a cell without its own runs: the built-in framework, or a site's script."""
    spec = workload(config)
    return DEFAULT_FRAMEWORK if spec.script == BUILTIN else spec.name


__all__ = [
    "Workload",
    "deep_merge",
    "load",
    "load_site_file",
    "parse_overrides",
    "pool_cells",
    "resolve",
    "session_workload",
    "workload",
]
