"""`faultloop catalog-gaps PROGRAM (--source DIR | --git GITDIR [--rev REV]) [--strings FILE]`: the
program's error and warning templates at one release that no catalog row shows, and the program's
rows that release does not print (faultloop.analyze.logsage.sources)."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

from faultloop.analyze.logsage import Settings, analyze_log, messages, sources


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="faultloop catalog-gaps",
        description="List a program's message templates that logsage's catalog does not hold yet.",
    )
    parser.add_argument("program", choices=sorted(sources.SCOPES))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--source", type=Path, help="a checkout of the program, or its installed package")
    where.add_argument("--git", type=Path, help="the program's git directory (a bare mirror will do)")
    parser.add_argument("--rev", default="HEAD", help="the tag or commit read with --git (default: HEAD)")
    parser.add_argument(
        "--strings",
        type=Path,
        action="append",
        default=[],
        help="`strings -n 8` of the release's compiled libraries, read as format strings (repeatable)",
    )
    parser.add_argument("--catalog", type=Path, default=messages.CATALOG, help="the catalog folder")
    parser.add_argument("--reviewed", type=Path, default=sources.REVIEWED, help="templates judged to need no row (TSV)")
    parser.add_argument("--kind", choices=(sources.REPORT, sources.CHECK, "all"), default="all")
    parser.add_argument(
        "--verdicts", action="store_true", help="add what logsage makes of each uncovered template alone"
    )
    args = parser.parse_args(argv)
    missing = [p for p in (args.source, args.git, args.reviewed, *args.strings) if p is not None and not p.exists()]
    if missing:
        print(f"faultloop catalog-gaps: no such path: {missing[0]}", file=sys.stderr)
        return 2
    try:
        reading = sources.read_templates(args.program, args.source, args.git, args.rev, args.strings)
        catalog = messages.load_catalog(args.catalog)
        reviewed = sources.load_reviewed(args.reviewed)
    except (subprocess.CalledProcessError, ValueError) as exc:
        print(f"faultloop catalog-gaps: {exc}", file=sys.stderr)
        return 2
    if args.kind != "all":
        reading = dataclasses.replace(reading, templates=[t for t in reading.templates if t.kind == args.kind])
    found = sources.coverage(reading, catalog, args.program, reviewed)
    print(
        f"# {args.program} at {args.source or f'{args.git}@{args.rev}'}: {len(found.templates)} templates,"
        f" {len(found.covered)} covered, {len(found.reviewed)} reviewed, {len(found.uncovered)} left;"
        f" catalog rows of {args.program}: {len(found.rows_seen)} printed, {len(found.rows_unseen)} not,"
        f" {len(found.rows_unread)} from files not read"
    )
    print("# left: path:line\temitter\tkind\ttemplate" + ("\tlogsage alone" if args.verdicts else ""))
    for template in found.uncovered:
        line = f"{template.path}:{template.line}\t{template.emitter}\t{template.kind}\t{template.text!r}"
        if args.verdicts:
            verdict = analyze_log(template.text.replace("{}", "3").split("\n"), Settings(prefilter="python"))
            line += f"\t{verdict.fault_category}/{verdict.restart}"
        print(line)
    print("# rows this release does not print: where\ttemplate")
    for row in found.rows_unseen:
        print(f"{row.where}\t{row.template}")
    return 0
