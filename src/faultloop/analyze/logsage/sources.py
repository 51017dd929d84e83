"""The catalog's coverage, read from a program's own sources: every error and warning template that
the program's relevant files print, turned into a regex, set against the catalog's rows.

The catalog (catalog/*.tsv) is written by hand from the programs' sources; this module lists what
it does not yet hold (templates no row shows, less those reviewed.tsv judges to need none) and what
a release no longer prints (rows whose wording no template of that release matches), so that
keeping it complete is a procedure rather than a sample (docs/analyzers.md, "Keeping the catalog
complete"). It reads a source checkout, a bare git directory at a revision (what a mirror gives),
or an installed package; for a release whose compiled parts have no source at hand, the `strings`
of its libraries stand in.

The extraction reads call sites, not a parse: an emitter's arguments are taken up to its closing
parenthesis (or `;` for a C++ stream, the line's end for a Python assert), their string literals
are the template's words, and whatever stands between two literals, and every format directive
inside one, is a value (`{}`); a log line shows a template when it holds the template's words in
order. Input is bounded: files over MAX_FILE_BYTES and call sites over
MAX_CALL_CHARS are skipped.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from faultloop.analyze.logsage.messages import Template, read_table

MAX_FILE_BYTES = 4_000_000  # the largest source file read (torch's ProcessGroupNCCL.cpp is ~250 KB)
MAX_CALL_CHARS = 4_000  # an emitter's arguments longer than this are not a message
MIN_WORDS = 12  # a template with fewer literal characters than this names nothing a row could match
HOLE = "\x00"  # a value the program fills in, while a template is built

REVIEWED = Path(__file__).parent / "reviewed.tsv"  # templates read and judged to need no catalog row
REVIEWED_COLUMNS = ("program", "template", "reason")
# why a template needs no row: a setting or bad value (a row or the result code's line reads it); a
# line that reports no failure (a skipped device, a fallback); the caller's misuse of NCCL's API; a
# check of the program's own invariants (a bug, no platform fault); a line printed after another
# failure, whose own line a row reads (teardown after an abort); code of another OS; the same
# failure as a named row's
REASONS = ("configuration", "info", "api_misuse", "internal", "consequence", "platform", "duplicate_of <row>")
_REASON = re.compile(r"configuration|info|api_misuse|internal|consequence|platform|duplicate_of \S+")

CHECK = "check"  # a precondition on the caller's arguments: misuse, which the generic exception rule reads
REPORT = "report"  # the program reports a failure or a warning it met at run time


@dataclass(frozen=True)
class Emitter:
    """A call that prints or raises a message: where its arguments start and how many lead the message."""

    name: str
    start: re.Pattern[str]  # matches up to and including the opening parenthesis (or the keyword)
    skip_args: int  # arguments before the message: a condition, an error type, a debug subsystem
    end: str  # what closes the arguments: ")" (a call), ";" (a C++ stream), "\n" (a Python statement)
    kind: str  # CHECK or REPORT


def _call(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern + r"\s*\(")


TORCH_CHECK_ = Emitter("TORCH_CHECK", _call(r"\bTORCH_CHECK(?:_MSG)?"), 1, ")", CHECK)
TORCH_CHECK_WITH = Emitter("TORCH_CHECK_WITH", _call(r"\bTORCH_CHECK_WITH"), 2, ")", REPORT)
C10_THROW = Emitter("C10_THROW_ERROR", _call(r"\bC10_THROW_ERROR"), 1, ")", REPORT)
TORCH_WARN = Emitter("TORCH_WARN", _call(r"\bTORCH_WARN(?:_ONCE)?"), 0, ")", REPORT)
C10D_LOG = Emitter("C10D_ERROR", _call(r"\bC10D_(?:ERROR|WARNING)"), 0, ")", REPORT)
GLOG = Emitter("LOG(ERROR)", re.compile(r"\bLOG\s*\(\s*(?:ERROR|WARNING)\s*\)\s*<<"), 0, ";", REPORT)
PY_RAISE = Emitter("raise", _call(r"\braise\s+[\w.]*(?:Error|Exception|Timeout|Closed|Failure)"), 0, ")", REPORT)
PY_LOG = Emitter(
    "logger",
    _call(r"\b(?:logger|log|_logger|LOG|logging|self\._logger)\.(?:error|warning|warn|exception|critical)"),
    0,
    ")",
    REPORT,
)
PY_WARN = Emitter("warnings.warn", _call(r"\bwarnings\.warn"), 0, ")", REPORT)
PY_ASSERT = Emitter("assert", re.compile(r"^\s*assert\b", re.MULTILINE), 1, "\n", CHECK)
NCCL_WARN = Emitter("WARN", _call(r"\bWARN"), 0, ")", REPORT)
SLURM_ERROR = Emitter("error", _call(r"(?<![\w.>])(?:error|fatal)"), 0, ")", REPORT)


@dataclass(frozen=True)
class Scope:
    """A program's files that can print a training log's failure, and the calls that print there."""

    paths: tuple[str, ...]  # globs relative to the checkout's root: `*` within a folder, `**/` any folders
    emitters: tuple[Emitter, ...]
    exclude: tuple[str, ...] = ("**/test/**/*", "**/tests/**/*", "**/*_test.*", "**/testing/**/*")


_TORCH_CPP = (TORCH_CHECK_, TORCH_CHECK_WITH, C10_THROW, TORCH_WARN, C10D_LOG, GLOG)
_PYTHON = (PY_RAISE, PY_LOG, PY_WARN)
SCOPES: dict[str, Scope] = {
    "torch": Scope(
        (
            "torch/csrc/distributed/c10d/**/*.c*",
            "torch/csrc/distributed/c10d/**/*.h*",
            "torch/include/torch/csrc/distributed/c10d/**/*.h*",  # an installed package's headers
            "c10/cuda/*.c*",
            "c10/cuda/*.h*",
            "torch/include/c10/cuda/*.h*",
            "torch/distributed/*.py",  # distributed_c10d, rendezvous, run, launch
            "torch/distributed/elastic/**/*.py",
            "torch/multiprocessing/*.py",
            "torch/utils/data/dataloader.py",
            "torch/utils/data/_utils/*.py",
            "torch/cuda/__init__.py",
        ),
        _TORCH_CPP + _PYTHON,
    ),
    "NCCL": Scope(
        (
            "src/**/*socket*",
            "src/**/*bootstrap*",
            "src/**/*net*",
            "src/**/*proxy*",
            "src/init*",
            "src/transport/**/*",
            "src/misc/*ibvwrap*",
        ),
        (NCCL_WARN,),
    ),
    "SLURM": Scope(
        (
            "src/srun/*.c",
            "src/srun/libsrun/*.c",
            "src/api/step_launch.c",
            "src/slurmd/slurmstepd/*.c",
            "src/plugins/task/cgroup/*.c",
            "src/plugins/gpu/nvml/*.c",
        ),
        (SLURM_ERROR,),
    ),
    "DeepSpeed": Scope(
        (
            "deepspeed/launcher/*.py",  # runner.py over pdsh/mpirun, launch.py per node
            "deepspeed/comm/*.py",
            "deepspeed/elasticity/*.py",
            "deepspeed/runtime/engine.py",
            "deepspeed/runtime/fp16/loss_scaler.py",
            "deepspeed/runtime/checkpoint_engine/*.py",
        ),
        _PYTHON,
    ),
    "Ray": Scope(
        (
            "python/ray/exceptions.py",  # a checkout; an installed package has the same paths below ray/
            "ray/exceptions.py",
            "python/ray/train/**/*.py",
            "ray/train/**/*.py",
            "python/ray/air/*.py",
            "ray/air/*.py",
        ),
        _PYTHON,
    ),
    "Megatron-LM": Scope(
        (
            "megatron/core/distributed/*.py",
            "megatron/core/optimizer/*.py",
            "megatron/optimizer/*.py",  # before megatron-core 0.6
            "megatron/training/*.py",
            "megatron/core/rerun_state_machine.py",
        ),
        (*_PYTHON, PY_ASSERT),
    ),
}


@dataclass(frozen=True)
class SourceTemplate:
    """One message a program's source prints: its words with `{}` for each value, where it stands."""

    text: str  # lines separated by "\n"
    path: str
    line: int
    emitter: str
    kind: str  # CHECK or REPORT

    def anchor(self) -> tuple[str, ...] | None:
        """The words of the template's line with the most of them, in order, whitespace collapsed:
        a log line shows the template when they stand in it in that order (`{}` anything between).
        None for a template with too few words to name anything."""
        line = max(self.text.split("\n"), key=_literal_length)
        if _literal_length(line) < MIN_WORDS:
            return None
        return tuple(piece for piece in (_squeeze(p) for p in line.split("{}")) if piece.strip())


def shows(anchor: tuple[str, ...], line: str) -> bool:
    """Whether the line holds the anchor's words in order (the leftmost match of each is as good as
    any, so this is linear: no regex that could backtrack on a long line)."""
    at = 0
    line = _squeeze(line)
    for piece in anchor:
        found = line.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _literal_length(text: str) -> int:
    return len(text.replace("{}", "").strip())


# --- reading the files -------------------------------------------------------------------------


def _glob(pattern: str) -> re.Pattern[str]:
    """A scope's path glob as a regex: `*` stays within a folder, `**/` spans any folders."""
    parts = re.split(r"(\*\*/|\*)", pattern)
    glob = {"**/": "(?:[^/]+/)*", "*": "[^/]*"}
    return re.compile("".join(glob.get(part, re.escape(part)) for part in parts))


def in_scope(path: str, scope: Scope) -> bool:
    return any(_glob(p).fullmatch(path) for p in scope.paths) and not any(
        _glob(p).fullmatch(path) for p in scope.exclude
    )


def files_in_directory(root: Path, scope: Scope) -> Iterator[tuple[str, str]]:
    """(relative path, text) of each file of the scope under a checkout or an installed package."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and in_scope(relative, scope) and path.stat().st_size <= MAX_FILE_BYTES:
            yield relative, path.read_text(errors="replace")


def files_at_revision(git_dir: Path, rev: str, scope: Scope) -> Iterator[tuple[str, str]]:
    """(path, text) of each file of the scope in a git repository (bare or not) at a revision."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-l", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for row in listing.splitlines():
        meta, path = row.split("\t", 1)
        _mode, kind, blob, size = meta.split()
        if kind == "blob" and in_scope(path, scope) and size.isdigit() and int(size) <= MAX_FILE_BYTES:
            text = subprocess.run(
                ["git", f"--git-dir={git_dir}", "cat-file", "blob", blob], capture_output=True, check=True
            ).stdout
            yield path, text.decode(errors="replace")


# --- extracting templates ----------------------------------------------------------------------

_STRING = re.compile(r"""(?P<prefix>(?<!\w)[rRbBuUfF]{1,2})?(?P<quote>'''|\"\"\"|'|")""")
# a printf directive; `%ps` is SLURM's step id
_PRINTF = re.compile(
    r"%(?:\([\w]+\))?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q)?(?:ps|[diouxXeEfgGcspn])"
)
_BRACES = re.compile(r"\{[^{}\n]*\}")
_ESCAPES = {"n": "\n", "t": " ", "r": "", "\\": "\\", "'": "'", '"': '"', "0": ""}


def _read_literal(source: str, at: int, quote: str, raw: bool) -> tuple[str, int]:
    """A string literal's text (escapes decoded) and the index just past its closing quote."""
    out: list[str] = []
    i = at
    while i < len(source):
        if source.startswith(quote, i):
            return "".join(out), i + len(quote)
        char = source[i]
        if char == "\\" and not raw and i + 1 < len(source):
            out.append(_ESCAPES.get(source[i + 1], source[i + 1]))
            i += 2
            continue
        if char == "\n" and len(quote) == 1:
            break  # an unterminated literal: not a string after all
        out.append(char)
        i += 1
    return "".join(out), len(source)


def _words(literal: str) -> str:
    """A literal's words with every format directive as HOLE (printf's, or f-string, str.format
    and fmt braces, where `{{` is a brace)."""
    text = _PRINTF.sub(HOLE, literal.replace("%%", "\x01"))
    text = re.sub(r"%$", HOLE, text)  # `"%" PRIu64`: the directive's rest is a macro after the literal
    text = text.replace("{{", "\x02").replace("}}", "\x03")
    text = _BRACES.sub(HOLE, text)
    return text.replace("\x01", "%").replace("\x02", "{").replace("\x03", "}")


def _arguments(source: str, at: int, end: str, comment: str) -> list[list[tuple[str, bool]]] | None:
    """The top-level arguments from `at` to the closing `end`: each a list of (text, is_literal)."""
    arguments: list[list[tuple[str, bool]]] = [[]]
    depth = 0
    i = at
    limit = min(len(source), at + MAX_CALL_CHARS)
    code_start = i
    while i < limit:
        char = source[i]
        string = _STRING.match(source, i) if char in "'\"rRbBuUfF" else None
        if string:
            if source[code_start:i].strip():
                arguments[-1].append((source[code_start:i], False))
            prefix = (string.group("prefix") or "").lower()
            text, i = _read_literal(source, string.end(), string.group("quote"), "r" in prefix)
            arguments[-1].append((_words(text), True))
            code_start = i
            continue
        if char in "([{":
            depth += 1
        elif depth == 0 and char == end:
            if source[code_start:i].strip():
                arguments[-1].append((source[code_start:i], False))
            return arguments
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif char == "," and depth == 0:
            if source[code_start:i].strip():
                arguments[-1].append((source[code_start:i], False))
            arguments.append([])
            code_start = i + 1
        elif source.startswith(comment, i):
            i = source.find("\n", i)
            if i < 0:
                return None
            code_start = i
            continue
        i += 1
    return None


def _template(arguments: list[list[tuple[str, bool]]]) -> str:
    """The message's words: its literals in order, a value wherever code stands between them.

    C++'s `c10::str(a, b)` and `<<` streams and Python's `+` all put code between literals; two
    literals side by side are one string (C++ and Python concatenate them)."""
    out: list[str] = []
    for argument in arguments:
        if any(not literal and re.search(r"\?|\bif\b", text) for text, literal in argument):
            out.append(HOLE)  # a conditional's literals are alternatives, one of which is printed
            continue
        for text, literal in argument:
            if literal:
                out.append(text)
            elif re.search(r"\w", text):
                out.append(HOLE)
        out.append(HOLE)  # a further argument is a value (a format's or c10::str's)
    text = "".join(out).rstrip(HOLE).lstrip(HOLE)
    text = re.sub(HOLE + "+", "{}", text)
    return re.sub(r"[ \t]+", " ", text).strip()


def extract(path: str, text: str, scope: Scope) -> Iterator[SourceTemplate]:
    """Every message the file's emitters print, in file order."""
    comment = "#" if path.endswith(".py") else "//"
    for emitter in scope.emitters:
        for match in emitter.start.finditer(text):
            if comment in text[text.rfind("\n", 0, match.start()) + 1 : match.start()]:
                continue  # a call commented out
            arguments = _arguments(text, match.end(), emitter.end, comment)
            if arguments is None:
                continue
            message = [a for a in arguments[emitter.skip_args :] if a]
            if emitter.end == "\n" and len(arguments) == 1:
                continue  # an assert without a message
            if not any(literal for argument in message for _, literal in argument):
                continue
            words = _template(message)
            if _literal_length(words) >= MIN_WORDS:
                line = text.count("\n", 0, match.start()) + 1
                yield SourceTemplate(words, path, line, emitter.name, emitter.kind)


def templates_from_strings(lines: Iterable[str], source: str) -> Iterator[SourceTemplate]:
    """A compiled release's printable strings (`strings -n 8 lib.so`), each read as a C format
    string: what stands in for the source of a release that has none at hand."""
    for number, line in enumerate(lines, start=1):
        words = re.sub(HOLE + "+", "{}", _words(line.rstrip("\n")[:MAX_CALL_CHARS]))
        if _literal_length(words) >= MIN_WORDS and re.search(r"[A-Za-z]{3} [A-Za-z]{2}", words):
            yield SourceTemplate(words.strip(), source, number, "strings", REPORT)


# --- against the catalog -----------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What was read of one release: its templates, the files they came from, and whether its
    compiled libraries' strings stood in for the sources not at hand."""

    templates: list[SourceTemplate]
    paths: frozenset[str]
    text: str  # every file and string read, for a row's words printed other than by an emitter
    compiled: bool = False

    def has_read(self, row: Template) -> bool:
        """Whether the row's source file was read, so that its absence says something."""
        source = row.source.split()[0]
        if self.compiled and not source.endswith(".py"):
            return True
        return any(path.endswith(source) or source.endswith(path) for path in self.paths)


@dataclass(frozen=True)
class Coverage:
    """A program's templates at one release against the catalog."""

    templates: list[SourceTemplate]
    covered: list[tuple[SourceTemplate, Template]]  # each with the first row that shows it
    uncovered: list[SourceTemplate]  # neither covered nor reviewed: what is left to judge
    reviewed: list[SourceTemplate]  # uncovered, but judged in reviewed.tsv to need no row
    rows_seen: list[Template]  # the program's rows whose wording a template of this release matches
    rows_unseen: list[Template]  # rows from a file read that no template matches: another release's wording
    rows_unread: list[Template]  # rows whose source file was not read: nothing said of them


def _row_lines(row: Template) -> list[str]:
    return [line for line in row.example() if line.strip()]


_EXCEPTION_PREFIX = re.compile(r"^[\w.]+(?:Error|Exception|Warning): ")
MIN_ROW_WORDS = 20  # a row's longest stretch of fixed words shorter than this is no evidence alone


def _row_words(row: Template) -> str:
    """The row's longest stretch of fixed words, without the exception class a traceback adds."""
    pieces = re.split(r"\{\w+\}|\\n", row.template)
    return max((_EXCEPTION_PREFIX.sub("", piece).strip() for piece in pieces), key=len)


def load_reviewed(path: Path = REVIEWED) -> frozenset[tuple[str, str]]:
    """(program, template) of every reviewed template: its text as catalog-gaps prints it, `\\n`
    between lines."""
    reviewed: set[tuple[str, str]] = set()
    for where, row in read_table(path, REVIEWED_COLUMNS):
        if not all(row.values()) or not _REASON.fullmatch(row["reason"]):
            raise ValueError(f"{where}: every field is needed; reason is one of {', '.join(REASONS)}")
        reviewed.add((row["program"], row["template"].replace("\\n", "\n")))
    return frozenset(reviewed)


def coverage(
    reading: Reading, catalog: list[Template], program: str, reviewed: frozenset[tuple[str, str]] = frozenset()
) -> Coverage:
    """Which templates a catalog row shows (any program's row: a launcher's table may hold a
    program's words), which are reviewed as needing none, and which of the program's rows this
    release prints."""
    unique = list({(t.text, t.kind): t for t in reading.templates}.values())
    anchors = [(t, t.anchor()) for t in unique]
    rows = [(row, [_squeeze(line) for line in _row_lines(row)]) for row in catalog]
    covered: list[tuple[SourceTemplate, Template]] = []
    uncovered: list[SourceTemplate] = []
    matched_rows: set[str] = set()
    for template, anchor in anchors:
        if anchor is None:
            continue
        hits = [row for row, lines in rows if any(shows(anchor, line) for line in lines)]
        if hits:
            covered.append((template, hits[0]))
            matched_rows.update(row.where for row in hits)
        else:
            uncovered.append(template)
    left = [t for t in uncovered if t.emitter != "strings"]  # a library's strings are no message list
    own = [row for row in catalog if row.program == program]
    for row in own:  # words a table or a return statement prints, read verbatim
        words = _row_words(row)
        if len(words) >= MIN_ROW_WORDS and words in reading.text:
            matched_rows.add(row.where)
    return Coverage(
        [t for t, a in anchors if a is not None],
        covered,
        [t for t in left if (program, t.text) not in reviewed],
        [t for t in left if (program, t.text) in reviewed],
        [row for row in own if row.where in matched_rows],
        [row for row in own if row.where not in matched_rows and reading.has_read(row)],
        [row for row in own if row.where not in matched_rows and not reading.has_read(row)],
    )


def read_templates(
    program: str,
    directory: Path | None = None,
    git_dir: Path | None = None,
    rev: str = "HEAD",
    strings: Iterable[Path] = (),
) -> Reading:
    """The program's templates from a checkout or an installed package (`directory`), a git
    repository at a revision (`git_dir`, `rev`), and the `strings` of its compiled libraries."""
    scope = SCOPES[program]
    files: Iterable[tuple[str, str]] = ()
    if directory is not None:
        files = files_in_directory(directory, scope)
    elif git_dir is not None:
        files = files_at_revision(git_dir, rev, scope)
    templates: list[SourceTemplate] = []
    paths: set[str] = set()
    texts: list[str] = []
    for relative, text in files:
        paths.add(relative)
        texts.append(text)
        templates += extract(relative, text, scope)
    for library in strings:
        text = library.read_text(errors="replace")
        texts.append(text)
        templates += templates_from_strings(text.splitlines(), library.name)
    return Reading(templates, frozenset(paths), "\n".join(texts), compiled=bool(strings))
