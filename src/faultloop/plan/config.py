"""Configuration: tracked defaults, the untracked site file, command-line overrides, the pool.

Precedence (lowest first): config/config.yaml, the site file (config/site.yaml), ``--config``.
The site file keeps cluster and credential settings out of git, like upstream's user.env.
What a valid configuration is, `workflow/schemas/config.schema.yaml` states, and only it: the workflow
checks the resolved configuration against it once, here (`resolve(..., check=True)`).
"""

from __future__ import annotations

import copy
import difflib
import re
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


def _schema() -> dict[str, Any]:
    """The config schema, a fresh copy (callers add the analyzers' part to theirs)."""
    schema: dict[str, Any] = yaml.safe_load(CONFIG_SCHEMA.read_text())
    return schema


def load_site_file(path: str | Path) -> dict[str, Any]:
    """Read the untracked site file; a missing file is an empty site."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
    except (yaml.YAMLError, ValueError) as error:  # ValueError: an integer longer than Python reads
        raise ConfigError(f"{path}{yaml_problem(error)}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of config keys, got {type(data).__name__}")
    return data


def yaml_problem(error: Exception) -> str:
    """A YAML error in one line, where it is first (`line 3 column 5: not valid YAML: ...`)."""
    mark = getattr(error, "problem_mark", None)
    where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{where}: not valid YAML: {problem}"


# Keys holding named entries that `--config key=a,b` selects from instead of replacing.
SELECTABLE = ("analyzers", "fr_analyzers")


def resolve(
    config: Mapping[str, Any],
    overrides: Mapping[str, Any],
    config_files: Iterable[str | Path] = (),
    *,
    check: bool = False,
    analyzer_schema: Mapping[str, Any] | None = None,
    texts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Apply the site file under the command-line overrides.

    With `check`, the result is checked against the config schema: a key it does not know (a
    typo such as `gpus_per_nod`) or a value it refuses fails here, named with where it came from.
    `--config analyzers=mine,builtin` (a name or a list) limits an invocation to those entries
    of `analyzers` (likewise `fr_analyzers`), in that order, as config_files and the site file
    define them; a name without an entry stands for the kind of that name. analyzer_schema: the
    analyzer keys' schema as the table of kinds states it (`analyze.registry.config_schema`), in
    place of the file's (which a test holds equal to the built-in table).

    With `check`, the overrides are first typed by the schema (`typed`): Snakemake hands nested
    `--config` values over as strings and guesses top-level ones (`session=20260101_1200` an
    integer); texts: the `--config` values as the command line spelled them, for the keys the
    schema wants as strings.
    """
    site_file = overrides.get("site_file", config.get("site_file", "config/site.yaml"))
    site = load_site_file(site_file)
    # The base config already holds the --config values (Snakemake merged them): each problem is
    # named once, with the most specific place it was given.
    layers = (("--config", overrides), (str(site_file), site), ("config/config.yaml", config))
    schema = _schema() if check else None
    if schema is not None:
        schema["properties"].update(analyzer_schema or {})
        overrides = typed(overrides, schema, texts or {})
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
        message = error.message
        if error.validator == "type" and isinstance(error.validator_value, str):
            wanted = TYPE_WORDS.get(error.validator_value, error.validator_value)
            message = f"expected {wanted}, got {error.instance!r:.60}"
        problems.append(f"{where}: config key '{key}': {message}")
    if problems:
        raise ConfigError("invalid configuration value(s):\n" + "\n".join(f"  - {p}" for p in problems))


# How a type error names what the schema wants.
TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
}
# The words a boolean key's value may be (case aside), as YAML 1.1 and shells spell them.
BOOLEAN_WORDS = dict.fromkeys(("true", "yes", "on", "1"), True) | dict.fromkeys(("false", "no", "off", "0"), False)
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
NUMBER = re.compile(r"[+-]?([0-9]{1,18}(\.[0-9]{0,18})?|\.[0-9]{1,18})([eE][+-]?[0-9]{1,3})?")


def typed(overrides: Mapping[str, Any], schema: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
    """The overrides as the schema types them: a key the schema wants as a string keeps the text
    the command line gave it; a string where it wants a number or a boolean is read as one (nested
    too: `run_job={iterations: 40}`). What cannot be read stays, for the check to name."""
    properties = schema.get("properties") or {}
    out = {}
    for key, value in overrides.items():
        node = _resolve_ref(properties.get(key, {}), schema)
        text = texts.get(key)
        out[key] = text if text is not None and "string" in _types(node) else _typed_value(value, node, schema)
    return out


def _types(node: Mapping[str, Any]) -> set[str]:
    kinds = node.get("type", [])
    enum = node.get("enum")
    strings = {"string"} if isinstance(enum, list) and any(isinstance(v, str) for v in enum) else set()
    return ({kinds} if isinstance(kinds, str) else set(kinds)) | strings


def _typed_value(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    node = _resolve_ref(node, root)
    if isinstance(value, Mapping):
        objects = [_resolve_ref(b, root) for b in (*node.get("oneOf", ()), *node.get("anyOf", ()))]
        node = next((b for b in objects if "object" in _types(b)), node)
        properties, extra = node.get("properties") or {}, node.get("additionalProperties")
        fallback = extra if isinstance(extra, Mapping) else {}
        return {k: _typed_value(v, properties.get(k, fallback), root) for k, v in value.items()}
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_typed_value(v, node["items"], root) for v in value]
    kinds = _types(node)
    if not isinstance(value, str) or not kinds or "string" in kinds:
        return value
    text = value.strip()
    if "integer" in kinds and INTEGER.fullmatch(text):
        return int(text)
    if "number" in kinds and NUMBER.fullmatch(text):
        number = float(text)
        return int(number) if number.is_integer() and abs(number) < 1 << 53 else number
    if "boolean" in kinds and text.lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[text.lower()]
    if "null" in kinds and text.lower() in ("", "~", "null", "none"):
        return None
    return value


def _holds(layer: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(layer, Mapping) or part not in layer:
            return False
        layer = layer[part]
    return True


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """Snakemake-style ``key=value`` overrides (YAML values), as given to ``--config``; a dotted
    key sets a nested one (`run_job.iterations=40`)."""
    overrides: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        parts = key.split(".")
        if not sep or not all(part.strip() for part in parts):
            raise ConfigError(f"expected key=value (a dotted key for a nested one), got {pair!r}")
        try:
            parsed = yaml.safe_load(value) if value else ""
        except (yaml.YAMLError, ValueError) as error:
            raise ConfigError(f"--config {key}{yaml_problem(error)}") from None
        section = overrides
        for part in parts[:-1]:
            if not isinstance(section.get(part), dict):
                section[part] = {}
            section = section[part]
        section[parts[-1]] = parsed
        texts[key] = value
    return typed(overrides, _schema(), texts)


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
