"""Reading one flight-recorder dump within its bounds (dumps are untrusted files).

Nothing a dump holds runs: the restricted unpickler resolves no global and no persistent id, so
only dicts, lists, tuples, sets and scalars can be built. What building may cost is bounded where
the bound costs nothing on an honest dump:

- its size, before a byte is read (`MAX_DUMP_BYTES`);
- the memory building and using it may take: new address space up to `memory_bound(size)`
  (RLIMIT_AS, lowered for the dump and restored), so what a pickle only declares (memo slot
  805,306,368 in 9 bytes, a 100 GB BINBYTES8) fails at once as the C unpickler allocates it;
- what it reads: the unpickler reads through `_Bytes`, which never hands out more than the file
  holds, so a length a pickle declares is never read into a buffer of that size;
- its CPU time, `cpu_bound(size)`, which `readers` enforces on the process that reads it;
- its structure: what was built must be a dump, and the readers of its fields check the types
  of the columns they use (`dumps`).

A refused dump is then walked by `pickle_bounds` to name, where its bytes break one, the bound
and the opcode that breaks it; honest dumps are never walked.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import resource
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from faultloop.analyze.fr import pickle_bounds

T = TypeVar("T")

# torch's default ring buffer (2000 entries) writes about 350 KB; 256 MiB is more than a million.
MAX_DUMP_BYTES = 256 << 20
# New address space a dump of n bytes may take while it is built and read: MEMORY_BASE plus
# MEMORY_PER_BYTE * n. torch's dumps build 6 to 11 bytes of objects per byte (the shared NCCL and
# gloo dumps, fr_synth's at 20 to 20,000 entries); the bound leaves six times that.
MEMORY_BASE = 8 << 20
MEMORY_PER_BYTE = 64
# CPU seconds a dump of n bytes may take to read (`readers`): CPU_BASE_S plus one per
# CPU_BYTES_PER_S. Unpickling and reducing an honest dump runs at about 50 MB/s here.
CPU_BASE_S = 1.0
CPU_BYTES_PER_S = 4 << 20


class UnsafeDumpError(pickle.UnpicklingError):
    """A dump asked for a Python global: it could run code if loaded plainly."""


def memory_bound(size: int) -> int:
    return MEMORY_BASE + MEMORY_PER_BYTE * size


def cpu_bound(size: int) -> float:
    return CPU_BASE_S + size / CPU_BYTES_PER_S


def too_deep(path: str) -> str:
    """Nesting meets the interpreter's recursion limit where a dump is read (the unpickler builds
    any depth without recursing; repr, comparisons and pickling recurse)."""
    return f"{path}: refused: nested deeper than the interpreter's recursion limit ({sys.getrecursionlimit()})"


class _PlainUnpickler(pickle.Unpickler):
    """Builds only what pickle opcodes build without globals: dicts, lists, tuples, sets, scalars."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeDumpError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeDumpError("refused persistent id")


class _Bytes:
    """A dump's bytes as the C unpickler's file. `peek` hands it all that is left, so it reads
    them in place, as `pickle.loads` does (the unpickler peeks before each read it cannot serve
    from what it holds); `read`, `readinto` and `readline` never hand out more than is there."""

    __slots__ = ("_data", "_pos", "_view")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._view = memoryview(data)
        self._pos = 0

    def peek(self, _size: int = 0) -> memoryview:
        return self._view[self._pos :]

    def read(self, size: int = -1) -> bytes:
        start = self._pos
        self._pos = len(self._data) if size < 0 else min(len(self._data), start + size)
        return self._data[start : self._pos]

    def readinto(self, buffer: memoryview) -> int:
        size = min(len(buffer), len(self._data) - self._pos)
        buffer[:size] = self._view[self._pos : self._pos + size]
        self._pos += size
        return size

    def readline(self) -> bytes:
        end = self._data.find(b"\n", self._pos)
        return self.read(-1 if end < 0 else end + 1 - self._pos)


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _address_space() -> int:
    """This process's mapped bytes now (what RLIMIT_AS counts), read as cheaply as Linux allows."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        return int(os.read(fd, 64).split()[0]) * _PAGE
    finally:
        os.close(fd)


@contextmanager
def _memory_held(extra: int) -> Iterator[bool]:
    """This process may map at most `extra` more bytes in the block, or less where its own limit
    says so; yields whether `extra` is the tighter (else running out is the process's limit)."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    soft = _address_space() + extra
    tighter = before[0] == resource.RLIM_INFINITY or soft < before[0]
    resource.setrlimit(resource.RLIMIT_AS, (soft if tighter else before[0], before[1]))
    try:
        yield tighter
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def _is_dump(dump: Any) -> bool:
    return (
        isinstance(dump, dict)
        and ("entries" in dump or "pg_config" in dump)
        and isinstance(dump.get("entries", []), list)
        and isinstance(dump.get("pg_config", {}), dict)
    )


class _Refused(Exception):
    """Building failed or built no dump: why, before the walk is asked for the bound broken."""


_UNREADABLE = (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError)


def _build(data: bytes, json_text: bool) -> Any:
    try:
        if json_text:
            return json.loads(data)
        return _PlainUnpickler(_Bytes(data)).load()
    except UnsafeDumpError:
        raise
    except (*_UNREADABLE, OverflowError, RecursionError) as exc:
        raise _Refused(f"not a readable dump ({type(exc).__name__}: {exc})") from None


def read_dump(path: str, use: Callable[[dict[str, Any]], T]) -> T:
    """Read one dump (torch pickle or JSON) within its bounds and return `use(dump)`, which runs
    under the same memory bound; every refusal is one line naming the file (ValueError, or
    UnsafeDumpError for a global). Where the process's own memory limit is tighter than the
    dump's bound, running out is a MemoryError, as anywhere else in the process."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_DUMP_BYTES:
            raise ValueError(f"{path}: refused: larger than {MAX_DUMP_BYTES >> 20} MiB")
        data = fh.read(size)  # read(n) allocates n up front: the file's size, not the bound
    if not data:
        raise ValueError(f"{path}: empty file")
    json_text = path.endswith(".json") or data[:1] == b"{"
    bound = memory_bound(len(data))
    # GC off: building makes hundreds of thousands of containers the cyclic GC would rescan for
    # nothing; they are freed by reference count when `use` is done with them.
    gc_was_on = gc.isenabled()
    gc.disable()
    dump_bound = False
    try:
        with _memory_held(bound) as dump_bound:
            dump = _build(data, json_text)
            if not _is_dump(dump):
                raise _Refused("not a flight-recorder dump (no entries/pg_config)")
            return use(dump)
    except _Refused as exc:
        reason = str(exc)
    except UnsafeDumpError as exc:
        reason = f"unsafe pickle: {exc}"
    except MemoryError:
        if not dump_bound:
            raise  # the process's own limit (`limits`): its caller reports it
        reason = (
            f"refused: needs more than {bound / (1 << 20):.0f} MiB to read "
            f"(the memory bound of a {len(data)}-byte dump)"
        )
    except RecursionError:
        raise ValueError(too_deep(path)) from None
    finally:
        if gc_was_on:
            gc.enable()
    raise _named(path, data, json_text, reason)


def _named(path: str, data: bytes, json_text: bool, reason: str) -> ValueError | UnsafeDumpError:
    """The refusal of a dump, naming the bound its bytes break where the opcode walk finds one."""
    if not json_text:
        try:
            pickle_bounds.check(data)
        except pickle_bounds.UnsafePickleError as exc:
            return UnsafeDumpError(f"{path}: unsafe pickle: {exc}")
        except pickle_bounds.PickleBoundError as exc:
            if not reason.startswith("unsafe"):
                return ValueError(f"{path}: refused before unpickling: {exc}")
    if reason.startswith("unsafe"):
        return UnsafeDumpError(f"{path}: {reason}")
    return ValueError(f"{path}: {reason}")


def load_dump(path: str) -> dict[str, Any]:
    """One dump, read within its bounds (`read_dump`)."""
    return read_dump(path, lambda dump: dump)
