"""Source fingerprints: a short hash of code plus settings, so a patched analyzer re-runs.

Snakemake does not notice edits to imported modules; rules put these hashes in their params so
that patching an analyzer re-runs the analysis (and only the analysis). A fingerprint covers a
whole package, a module's code, or the code a command runs (`code_fingerprint`: the modules it
imports, transitively, and the data files beside them), never a hand-kept list of modules, so
no module can be left out. This module imports nothing from faultloop, so any module (and the
workflow) can use it without import cycles.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
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


def package_root(name: str) -> Path:
    """The folder of the top-level package of module `name`, found without importing it."""
    spec = importlib.util.find_spec(name.split(".")[0])
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(name)
    return Path(spec.origin).parent


def module_file(root: Path, name: str) -> Path | None:
    """The source file of module `name` in the package whose folder is `root` (`root.name` is the
    package's name), or None when it is not one of that package's modules."""
    parts = name.split(".")
    if parts[0] != root.name:
        return None
    base = root.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def module_name(root: Path, path: Path) -> str:
    """The dotted name of a source file of the package whose folder is `root`."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, name: str) -> set[str]:
    """Every module name a source file imports (anywhere in it, lazy imports too), parsed, never
    run: `from a import b` names both `a` and `a.b` (b may be a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def code_files(*entries: str) -> list[Path]:
    """The files the code of modules `entries` consists of: each module, every module of its
    package that it imports (transitively), the packages around them (their `__init__` runs on
    import), and the data beside each module (files in its folder and in sub-folders that are not
    packages, such as templates or tables)."""
    root = package_root(entries[0])
    seen: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        path = module_file(root, name)
        if path is None or name in seen:
            continue
        seen[name] = path
        parents = [".".join(name.split(".")[:i]) for i in range(1, len(name.split(".")))]
        todo += parents + sorted(imported_names(path, name))
    files = set(seen.values())
    for folder in {path.parent for path in seen.values()}:
        files.update(data_files(folder))
    return sorted(files)


def data_files(folder: Path) -> set[Path]:
    """The non-Python files of a package folder, with those of its sub-folders that are not
    packages themselves."""
    found: set[Path] = set()
    for path in folder.iterdir():
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            found.add(path)
        elif path.is_dir() and path.name != "__pycache__" and not (path / "__init__.py").is_file():
            found.update(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return found


def code_fingerprint(*entries: str, settings: Any = None) -> str:
    """Short hash of the code modules `entries` run (`code_files`) plus the settings' repr."""
    digest = hashlib.sha256()
    root = package_root(entries[0])
    for path in code_files(*entries):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    digest.update(repr(settings).encode())
    return digest.hexdigest()[:12]


__all__ = [
    "code_files",
    "code_fingerprint",
    "imported_names",
    "module_file",
    "module_name",
    "package_root",
    "source_fingerprint",
]
