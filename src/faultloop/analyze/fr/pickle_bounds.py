"""Checking a pickle's opcode stream against its own bytes, to name the bound it breaks.

The C unpickler trusts what a pickle declares: a memo slot index sizes its memo array (a 9-byte
pickle naming slot 805,306,368 costs 12 GB), a declared length is allocated before it is read.
`reading` holds it to a memory bound per dump instead, which costs an honest dump nothing; a dump
it refuses is walked here, without building objects, to say which bound its bytes break and at
which opcode (`PickleBoundError`, one line). The walk is one pass over the bytes with a table
lookup per opcode, in Python: about 8 ms for torch's default 350 KB dump, which is why honest
dumps are not walked.
"""

from __future__ import annotations

import pickletools
import struct
from typing import NoReturn

# Nesting: MARKs open at once (each starts a container's items). A dump nests about six deep.
MAX_DEPTH = 1_000
# Objects a dump may build (every value an opcode pushes). A 20,000-entry NCCL ring buffer
# needs about a million; ten million is a few GB of Python objects at most.
MAX_OBJECTS = 10_000_000

_REFUSED = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"}

# What the walk does at each opcode; most are _PLAIN (skip a fixed-size argument).
(
    _PLAIN,
    _COUNTED,
    _LINE,
    _TWO_LINES,
    _PUT,
    _BINPUT,
    _LONG_BINPUT,
    _MEMOIZE,
    _MARK,
    _POP_MARK,
    _FRAME,
    _STOP,
    _REFUSE,
) = range(13)
_COUNT_WIDTH = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}


class PickleBoundError(ValueError):
    """The opcode stream breaks a stated bound (or is not a pickle); the message names which."""


class UnsafePickleError(PickleBoundError):
    """The stream asks for a Python global or a persistent id: loading it could run code."""


def _table() -> list[tuple[int, int, bool]]:
    """Per opcode byte: (what the walk does, argument size or count width, count signed)."""
    table = [(-1, 0, False)] * 256
    for op in pickletools.opcodes:
        arg = op.arg
        size, signed = (arg.n if arg and arg.n > 0 else 0), False
        if op.name in _REFUSED:
            kind = _REFUSE
        elif op.name == "PUT":
            kind = _PUT
        elif op.name == "BINPUT":
            kind = _BINPUT
        elif op.name == "LONG_BINPUT":
            kind = _LONG_BINPUT
        elif op.name == "MEMOIZE":
            kind = _MEMOIZE
        elif op.name == "MARK":
            kind = _MARK
        elif pickletools.markobject in op.stack_before:
            kind = _POP_MARK
        elif op.name == "FRAME":
            kind = _FRAME
        elif op.name == "STOP":
            kind = _STOP
        elif arg is not None and arg.n == pickletools.UP_TO_NEWLINE:
            kind = _TWO_LINES if arg.name == "stringnl_noescape_pair" else _LINE
        elif arg is not None and arg.n < 0:
            kind = _COUNTED
            size, signed = _COUNT_WIDTH[arg.n]
        else:
            kind = _PLAIN
        table[ord(op.code)] = (kind, size, signed)
    return table


_TABLE = _table()
# The fast paths: the byte step of each _PLAIN opcode and of BINPUT (its slot is below 256), and
# the count width of each length-prefixed opcode whose count is unsigned; 0 for the rest.
_PLAIN_STEP = [1 + size if kind in (_PLAIN, _BINPUT) else 0 for kind, size, _ in _TABLE]
_UNSIGNED_COUNT = [size if kind == _COUNTED and not signed else 0 for kind, size, signed in _TABLE]
# MARK opens one more nesting level, the opcodes that pop to a MARK (none with an argument) close one
_DEPTH_STEP = [1 if kind == _MARK else -1 if kind == _POP_MARK else 0 for kind, _, _ in _TABLE]
_NO_STEP = [0] * 256
_slot_at = struct.Struct("<I").unpack_from  # LONG_BINPUT's memo slot, read in place
_LONG_BINPUT_CODE = next(ord(op.code) for op in pickletools.opcodes if op.name == "LONG_BINPUT")
BINPUT_SLOTS = 256  # BINPUT names slots 0-255; a pickler numbers later ones by LONG_BINPUT, PUT, MEMOIZE
_NAMES = {ord(op.code): op.name for op in pickletools.opcodes}


def _refusal(data: bytes, at: int) -> str:
    """Why an opcode is refused, naming the global where the opcode spells it out."""
    name = _NAMES[data[at]]
    if name in ("GLOBAL", "INST"):
        module, _, rest = data[at + 1 : at + 400].partition(b"\n")
        attr = rest.partition(b"\n")[0]
        return f"refused global {module.decode(errors='replace')}.{attr.decode(errors='replace')} at byte {at}"
    if name == "STACK_GLOBAL":  # its names are the last two strings pushed (walked again, bounded)
        strings: list[str] = []
        try:
            for _, arg, _ in pickletools.genops(data[:at]):
                if isinstance(arg, str):
                    strings = [*strings[-1:], arg[:200]]
        except ValueError:
            pass
        if len(strings) == 2:
            return f"refused global {strings[0]}.{strings[1]} at byte {at}"
    return f"refused {name} at byte {at} (a global or persistent id)"


def check(data: bytes, *, max_depth: int = MAX_DEPTH, max_objects: int = MAX_OBJECTS) -> None:
    """Walk a pickle's opcodes up to STOP; raise PickleBoundError at the first broken bound:
    an unknown opcode, an argument or declared length past the end of the bytes, a memo slot
    stored past `BINPUT_SLOTS` plus the LONG_BINPUT, PUT and MEMOIZE seen so far (picklers number
    slots in order, the first 256 by BINPUT), more than `max_depth` nested MARKs, or more than
    `max_objects` opcodes (each builds at most one object). Globals are refused here too.

    Fetching a memo slot never stored, or popping an empty stack, the unpickler itself refuses
    without cost; they are left to it.
    """
    end = len(data)
    pos = 0
    depth = 0  # MARKs open
    memo = BINPUT_SLOTS  # the highest memo slot a put may name here
    ops = 0
    table = _TABLE
    # Every opcode is at least a byte: a stream shorter than max_objects cannot break that bound,
    # so only a longer one takes every opcode through the counting path.
    fast = end <= max_objects
    plain_step, counted, depth_step = (_PLAIN_STEP, _UNSIGNED_COUNT, _DEPTH_STEP) if fast else (_NO_STEP,) * 3
    while pos < end:
        op = data[pos]
        step = plain_step[op]
        if step:  # the fast paths: most opcodes, numbered memo slots, MARKs and what pops them, strings
            pos += step
            continue
        if op == _LONG_BINPUT_CODE:
            index = _slot_at(data, pos + 1)[0] if pos + 5 <= end else int.from_bytes(data[pos + 1 : pos + 5], "little")
            if index > memo:
                raise PickleBoundError(
                    f"LONG_BINPUT at byte {pos}: memo slot {index} out of bounds (at most {memo} here)"
                )
            memo += 1
            pos += 5
            continue
        step = depth_step[op]
        if step and 0 <= depth + step <= max_depth:  # (one that breaks the bound is named below)
            depth += step
            pos += 1
            continue
        width = counted[op]
        if width:
            pos += 1 + width
            length = int.from_bytes(data[pos - width : pos], "little")
            if length > end - pos:
                if pos > end:
                    break
                _too_long(data, pos - 1 - width, length, end - pos)
            pos += length
            continue
        at = pos
        kind, size, signed = table[op]
        pos += 1 + size
        ops += 1
        if kind == _PLAIN or kind == _BINPUT:
            continue
        if kind == _COUNTED:
            if pos > end:
                break
            length = int.from_bytes(data[pos - size : pos], "little", signed=signed)
            if length < 0 or length > end - pos:
                _too_long(data, at, length, end - pos)
            pos += length
        elif kind == _PUT:  # (LONG_BINPUT took its fast path)
            newline = data.find(b"\n", pos)
            text = data[pos:newline]
            if newline < 0 or not text.isdigit() or len(text) > 12:
                raise PickleBoundError(f"PUT at byte {at}: memo index is not a number")
            index, pos = int(text), newline + 1
            if index > memo:
                raise PickleBoundError(f"PUT at byte {at}: memo slot {index} out of bounds (at most {memo} here)")
            memo += 1
        elif kind == _MARK:
            depth += 1
            if depth > max_depth:
                raise PickleBoundError(f"more than {max_depth} nested MARKs at byte {at}")
        elif kind == _POP_MARK:
            if not depth:
                raise PickleBoundError(f"{_NAMES[data[at]]} at byte {at}: no MARK to pop to")
            depth -= 1
        elif kind == _MEMOIZE:
            memo += 1
        elif kind == _LINE or kind == _TWO_LINES:
            for _ in range(2 if kind == _TWO_LINES else 1):
                newline = data.find(b"\n", pos)
                if newline < 0:
                    raise PickleBoundError(f"{_NAMES[data[at]]} at byte {at}: argument has no end of line")
                pos = newline + 1
        elif kind == _FRAME:
            if pos <= end and int.from_bytes(data[pos - 8 : pos], "little") > end - pos:
                raise PickleBoundError(f"FRAME at byte {at}: declares more bytes than the file has left")
        elif kind == _STOP:
            if ops <= max_objects:
                return
            break
        elif kind == _REFUSE:
            raise UnsafePickleError(_refusal(data, at))
        else:
            raise PickleBoundError(f"unknown opcode 0x{data[at]:02x} at byte {at}")
    if ops > max_objects:
        raise PickleBoundError(f"more than {max_objects} objects")
    raise PickleBoundError("ends before its STOP opcode (truncated)")


def _too_long(data: bytes, at: int, length: int, left: int) -> NoReturn:
    raise PickleBoundError(
        f"{_NAMES[data[at]]} at byte {at}: declared length {length} but {max(left, 0)} bytes are left"
    )
