"""Source fingerprints: a short hash of code plus settings, so a patched analyzer re-runs.

Snakemake does not notice edits to imported modules; rules put these hashes in their params so
that patching an analyzer re-runs the analysis (and only the analysis). This module imports
nothing from faultloop, so any module (and the workflow) can use it without import cycles.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any


def source_fingerprint(*objects: Any, settings: Any = None) -> str:
    """Short hash of the source of modules, packages (every .py file in them) or functions,
    plus the settings' repr."""
    digest = hashlib.sha256()
    for obj in objects:
        if isinstance(obj, ModuleType) and hasattr(obj, "__path__"):
            for root in obj.__path__:
                for path in sorted(Path(root).rglob("*.py")):
                    digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        else:
            digest.update(inspect.getsource(obj).encode())
    digest.update(repr(settings).encode())
    return digest.hexdigest()[:12]


__all__ = ["source_fingerprint"]
