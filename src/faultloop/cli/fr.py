"""`faultloop fr --fr-path DIR`: attribute a failed job from its flight-recorder dumps."""

from __future__ import annotations

import argparse
import os
import sys

from faultloop.analyze import limits
from faultloop.analyze.fr.analysis import analyze_dir
from faultloop.analyze.fr.dumps import DEFAULT_PATTERN, find_dumps
from faultloop.core import atomic


def bad_dump_path(fr_path: str, pattern: str) -> str | None:
    """Why `fr_path` is neither a dump folder nor a prefix path like DIR/_dump_ (an existing folder
    and the start of the dumps' names, or of some files' there); None when it is one. A folder
    without dumps is a result (no dumps), a missing folder or a file is a mistake."""
    if os.path.isdir(fr_path):
        return None
    if os.path.isfile(fr_path):
        return f"{fr_path} is a file, not a dump folder (nor a prefix such as DIR/_dump_)"
    folder, prefix = os.path.split(fr_path)
    if os.path.isdir(folder or ".") and prefix and (pattern.startswith(prefix) or find_dumps(fr_path, pattern)):
        return None
    return f"no such dump folder: {fr_path}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop fr", description=__doc__)
    parser.add_argument("--fr-path", required=True, help="dump directory, or a prefix path like DIR/_dump_")
    parser.add_argument("-p", "--pattern", default=DEFAULT_PATTERN, help="file name glob (default %(default)s)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--segment-size", type=int, default=32)
    parser.add_argument("--world-size", type=int, default=None, help="expected ranks 0..N-1 (else from pg_config)")
    parser.add_argument("--workers", type=int, default=None, help="reader processes (default: usable cores)")
    parser.add_argument("--output-json", help="also write fr.json here (atomically)")
    parser.add_argument("--output-text", help="also write the table here (atomically)")
    args = parser.parse_args(argv)
    problem = bad_dump_path(args.fr_path, args.pattern)
    if problem:
        print(f"faultloop fr: {problem}", file=sys.stderr)
        return 2
    limit = limits.memory_limit()
    try:  # dumps are untrusted: this process and its readers under the limit
        with limits.held_to(limit):
            result = analyze_dir(
                args.fr_path,
                args.pattern,
                world_size=args.world_size,
                gpus_per_node=args.gpus_per_node,
                segment_size=args.segment_size,
                workers=args.workers,
            )
    except MemoryError:
        print(f"faultloop fr: {limits.over_limit(limit or 0)}", file=sys.stderr)
        return 1
    atomic.emit_result(
        result.to_table(),
        result.to_verdict().to_json(),
        text_path=args.output_text,
        json_path=args.output_json,
        stdout_format=args.format,
    )
    return 0
