"""What NVRx's analyzers run from and how: the checkout and its interpreter (`Checkout`, from
`nvrx.src`/`nvrx.python` or the environment), an analyzer's endpoint, NVRx's command lines, and
the dump copies its tools read in place of the originals (which they would `pickle.load`)."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultloop.analyze.fr import dumps
from faultloop.analyze.nvrx import (
    COMBINED,
    DUMP_PATTERN,
    FR,
    KEY_FILE_ENV,
    LOGSAGE,
    MODULES,
    NEEDS_ENDPOINT,
    PACKAGE,
    PYTHON_ENV,
    RESTART_AGENT,
    SRC_ENV,
)
from faultloop.contracts import SkippedFile
from faultloop.core import layout
from faultloop.core.errors import ConfigError


@dataclass(frozen=True)
class Checkout:
    """Where NVRx's code is and which interpreter runs it."""

    src: str
    python: str

    def env(self, key_file: str = "") -> dict[str, str]:
        """The environment of an NVRx process: its checkout first on the path, its key file."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.src, env.get("PYTHONPATH", "")) if p)
        env.pop("LLM_API_KEY", None)  # only the configured key file, never a key from our environment
        if key_file:
            env[KEY_FILE_ENV] = os.path.expanduser(key_file)
        return env

    def digest(self) -> str:
        """NVRx's attribution code as it is now: a patched checkout re-runs its analyzers."""
        digest = hashlib.sha256()
        root = Path(self.src) / PACKAGE / "attribution"
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()[:16]


def checkout(config: Mapping[str, Any], where: str, kind: str) -> Checkout:
    """The configured checkout (`nvrx.src`, else $NVRX_SRC) and interpreter (`nvrx.python`, else
    $NVRX_PYTHON, else this one); a ConfigError of one line naming what to point it at."""
    section = config.get("nvrx") or {}
    src = str(section.get("src") or os.environ.get(SRC_ENV, "")).strip()
    python = str(section.get("python") or os.environ.get(PYTHON_ENV, "") or sys.executable).strip()
    if not src:
        raise ConfigError(
            f"{where}: kind {kind} runs NVRx from a checkout: set nvrx.src (or {SRC_ENV}) to its src/ folder"
        )
    if not (Path(src) / PACKAGE / "attribution").is_dir():
        raise ConfigError(f"{where}: nvrx.src {src!r} is not an NVRx checkout's src/ (no {PACKAGE}/attribution/ in it)")
    if not os.access(python, os.X_OK):
        raise ConfigError(f"{where}: nvrx.python {python!r} is not an executable interpreter")
    return Checkout(str(Path(src).resolve()), python)


def endpoint(config: Mapping[str, Any], entry: Mapping[str, Any], where: str, kind: str) -> dict[str, Any]:
    """The analyzer's OpenAI-compatible endpoint (its own `llm`, else `logsage.llm`); refused in
    one line when a kind that needs one has none. Empty for the Restart Agent without one."""
    merged = {**(config.get("logsage") or {}).get("llm", {}), **(entry.get("llm") or {})}
    configured = bool(merged.get("base_url") and merged.get("model"))
    if kind in NEEDS_ENDPOINT and not configured:
        raise ConfigError(
            f"{where}: kind {kind} needs an LLM endpoint: set llm.base_url and llm.model (or logsage.llm's)"
        )
    return merged if configured else {}


# ---- command lines ----------------------------------------------------------------------------


def restart_agent_argv(python: str, log: Path, llm: Mapping[str, Any]) -> list[str]:
    """Deterministic (L0A-L4, `--disable-l1`) without an endpoint; with one, L1 enrichment on.
    The agent refuses a relative log path."""
    argv = [python, "-m", MODULES[RESTART_AGENT], str(log.resolve())]
    if not llm:
        return [*argv, "--disable-l1"]
    argv += ["--enable-l1", "--llm-base-url", str(llm["base_url"]), "--llm-model", str(llm["model"])]
    if llm.get("api_key_file"):
        argv += ["--llm-api-key-file", os.path.expanduser(str(llm["api_key_file"]))]
    return [*argv, "--llm-timeout-seconds", str(float(llm.get("timeout_s", 60)))]


def logsage_argv(python: str, log: Path, llm: Mapping[str, Any]) -> list[str]:
    return [
        python, "-m", MODULES[LOGSAGE], "--log-path", str(log.resolve()), "-m", str(llm["model"]),
        "-b", str(llm["base_url"]), "--exclude_nvrx_logs", "--emit-stdout",
    ]  # fmt: skip


def fr_argv(python: str, folder: Path) -> list[str]:
    return [python, "-m", MODULES[FR], "--fr-path", str(folder.resolve()), "-p", DUMP_PATTERN]


# combined_log_fr only logs its merged answer, at INFO, without configuring logging: the runner turns
# INFO records on (on stdout, in logging's default format) and then runs the module as its own main.
COMBINED_RUNNER = (
    "import logging, runpy, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def combined_argv(python: str, log: Path, copies: Path, llm: Mapping[str, Any]) -> list[str]:
    return [
        python, "-c", COMBINED_RUNNER, MODULES[COMBINED], "--log-path", str(log.resolve()),
        "--fr-path", str(copies.resolve()), "-m", str(llm["model"]), "-b", str(llm["base_url"]), "--exclude_nvrx_logs",
    ]  # fmt: skip


# ---- the dumps NVRx's tools read --------------------------------------------------------------


def dumps_beside(log: Path) -> Path | None:
    """A cell's dump folder, for the cell's stripped log (elsewhere, e.g. a corpus log: None)."""
    if not log.as_posix().endswith(layout.STRIPPED_LOG):
        return None
    cell_dir = log.parents[len(Path(layout.STRIPPED_LOG).parts) - 1]
    return cell_dir / Path(layout.FR_DUMP_PREFIX).parent


def copy_dumps(paths: list[str], dest: Path) -> tuple[list[int], list[SkippedFile]]:
    """Copies an NVRx tool may read (it would `pickle.load` the originals): the restricted
    reader's rewrites, not normalised. The ranks copied, and the files left out with why."""
    ranks, skipped, _ = dumps.rewrite_dumps(paths, dest)
    return ranks, skipped
