"""The `faultloop` command: it picks the subcommand; the subcommand's module parses its arguments
and calls the library with typed values (faultloop.cli.<verb>)."""

from __future__ import annotations

import importlib
import sys

from faultloop.core.errors import no_space

# subcommand -> (module, one-line help). Each module exposes main(argv: list[str]) -> int and is
# imported only when its command runs (a rule's command pays for no other command's imports).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "pool": ("faultloop.cli.pool", "validate a pool and print its cells"),
    "where": ("faultloop.cli.where", "print the session folder and report path for key=value overrides"),
    "cell": ("faultloop.cli.cell", "the per-cell workflow steps: run (run_job) and strip-log"),
    "run-job": ("faultloop.cli.run_job", "run one pool cell's training job and write its manifest"),
    "logsage": ("faultloop.cli.logsage", "attribute a failed job from its log"),
    "eval-logs": ("faultloop.cli.eval_logs", "score logsage on a folder of labelled real failure logs"),
    "analyzers": ("faultloop.cli.analyzers", "the configured log analyzers: list, try one on a log, run a cell's"),
    "catalog-gaps": (
        "faultloop.cli.catalog_gaps",
        "the message templates of a program's sources that logsage's catalog does not hold",
    ),
    "fr": ("faultloop.cli.fr", "attribute a failed job from its flight-recorder dumps"),
    "fr-analyzers": ("faultloop.cli.fr_analyzers", "every configured FR analyzer on a cell's dumps (rule fr_analysis)"),
    "check-session": (
        "faultloop.cli.check_session",
        "whether a session ran as its pool says: every fault fired as planned, the programs' own lines logged",
    ),
    "score": ("faultloop.cli.score", "score one cell's attribution against the injected truth"),
    "history": ("faultloop.cli.history", "record each log analyzer's scores under its version in history/"),
    "report": ("faultloop.cli.report", "aggregate scores into the session report"),
    "adopt": (
        "faultloop.cli.adopt",
        "take in a session NVRx's bash loop ran, to re-judge it without running anything",
    ),
    "screenshot": ("faultloop.cli.screenshot", "picture the HTML report as headless chromium renders it"),
}


def usage() -> str:
    lines = ["usage: faultloop <command> [options]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        print(f"faultloop: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[command][0])
    try:
        return int(module.main(rest) or 0)
    except OSError as error:
        line = no_space(error, f"faultloop {command}")
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
